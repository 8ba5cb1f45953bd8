"""Magentic files: a planning manager, a file reader and a coder answer from a file.

A `Magentic` team (AutoGen's Magentic-One): the manager's model writes a task ledger (facts
and a plan), a person reviews the plan before work starts (here the script plays the
reviewer and sets the plan), then the manager works in rounds: each round its model fills
in the progress ledger (done? looping? progressing? who next, doing what?) and the chosen
specialist takes the turn. The file reader's tools read only under the given folder; the
coder's code runs in a child Python with a timeout, a scratch directory and no network.

On the embedded model (SmolLM2-135M) every ledger is grammar-constrained, so the next
speaker is always a real participant; the guards for small models are on: compact ledgers
(no reasons: fewer tokens), ``max_repeats=1`` (nobody speaks twice in a row, so both
specialists get turns) and ``require_plan_done=True`` (the task is not "done" before both
have worked); the round limit bounds the run whatever the model decides.

    python examples/magentic_files.py
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path

from cantata.models import ChatClient, ChatOptions
from cantata.teams import coder_agent, file_reader_agent
from cantata.teams.magentic import Magentic, PlanReview, PlanReviewAnswer, PlanStep
from cantata.teams.result import TaskResult
from cantata.teams.session import TeamSession
from cantata.tools import LocalCodeExecutor
from cantata.workflows import RequestInfoEvent

TASK = "Read notes.txt, then use Python to multiply the two numbers it gives."
REVIEWED_PLAN = [
    PlanStep("file_reader", "Read notes.txt and report the two numbers."),
    PlanStep("coder", "Run print(6 * 7) in Python and report the output."),
]


def build_team(client: ChatClient, root: Path, executor: LocalCodeExecutor) -> Magentic:
    """The manager, a file reader confined to `root`, and a coder running in `executor`."""
    reader = file_reader_agent(client, root, include_listing=False)
    coder = coder_agent(
        client,
        executor,
        instructions="You run Python. Call run_python with one line that prints the answer.",
        max_code_chars=200,  # one line; the grammar closes the string even if the model rambles
        options=ChatOptions(temperature=0.0),
    )
    return Magentic(
        client,
        [reader, coder],
        plan_review=True,
        require_plan_done=True,
        max_repeats=1,
        compact_ledgers=True,
        max_rounds=4,
        max_stalls=2,
        max_resets=1,
        manager_options=ChatOptions(temperature=0.0, max_tokens=200),
        ledger_retries=1,
    )


async def main(
    task: str = TASK, client: ChatClient | None = None, root: Path | None = None
) -> TaskResult:
    """Run the team once; prints the plan review, each routing decision and the transcript."""
    if client is None:
        from cantata.models import LocalChatClient

        client = LocalChatClient()
    with tempfile.TemporaryDirectory(prefix="magentic-files-") as scratch:
        folder = root or Path(scratch)
        if root is None:
            (folder / "notes.txt").write_text("The two numbers are 6 and 7.\n")
        async with LocalCodeExecutor(timeout=10) as executor:
            session = build_team(client, folder, executor).create_session()
            result = await _run(session, task)
    for message in result.messages:
        print(f"{message.author_name}: {message.text}")
    print(f"[stopped: {result.stop_reason}]")
    return result


async def _run(session: TeamSession, task: str) -> TaskResult:
    review: RequestInfoEvent | None = None
    async for item in session.run_stream(task):
        if isinstance(item, RequestInfoEvent) and isinstance(item.data, PlanReview):
            review = item
            print(f"plan for review:\n{item.data.ledger.as_text()}")
    if review is None:
        raise RuntimeError("the team did not ask for a plan review")
    print("reviewer: approved, with the plan set to the two steps above")
    return await session.send_responses({review.request_id: PlanReviewAnswer(plan=REVIEWED_PLAN)})


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else TASK))
