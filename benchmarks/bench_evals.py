"""An eval of 1,000 cases on recordings (cases/s), against pydantic_evals on the same
cases, the same target and the same evaluators, in the same run.

Both sides evaluate one `ChatAgent` whose model is a `ReplayChatClient` on one cassette
(recorded once from a scripted model before timing: 1,000 questions, 1,000 answers), with
three evaluators: the answer equals the expected output, contains it, and took at most
10 s (cantata's `Exact`, `Contains`, `MaxLatency`; pydantic_evals' `EqualsExpected`,
`Contains`, `MaxDuration`), at concurrency 16. Each side gets a fresh replay client, so
both pay the same model-side cost and the figure is the eval machinery's. pydantic_evals
runs with its progress bar off.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path
from typing import Any

from _harness import Row, peer_version
from cantata.agents import ChatAgent
from cantata.evals import Case, Contains, Exact, MaxLatency, evaluate
from cantata.models import Cassette, RecordingChatClient, ReplayChatClient, ScriptedChatClient

CASES = 1_000
CONCURRENCY = 16


def _answer(messages: list[Any], options: Any) -> str:
    return f"answer {messages[-1].text.split()[-1]}"


async def _cassette(n: int) -> Cassette:
    path = Path(tempfile.mkdtemp()) / "bench.cassette.json"
    agent = ChatAgent(RecordingChatClient(ScriptedChatClient(_answer), path), name="bench")
    for i in range(n):
        await agent.run(f"question {i}")
    return Cassette.load(path)


def _agent(cassette: Cassette) -> ChatAgent:
    return ChatAgent(ReplayChatClient(cassette), name="bench")


async def _ours(cassette: Cassette, n: int) -> float:
    cases = [Case(f"c{i}", f"question {i}", f"answer {i}") for i in range(n)]
    agent = _agent(cassette)
    t0 = time.perf_counter()
    report = await evaluate(agent, cases, evaluators=[Exact(), Contains(), MaxLatency(seconds=10)],
                            concurrency=CONCURRENCY)  # fmt: skip
    took = time.perf_counter() - t0
    assert report.pass_rate == 1.0, report.failures()[:1]
    return n / took


async def _peer(cassette: Cassette, n: int) -> float | None:
    try:
        from pydantic_evals import Case as PCase
        from pydantic_evals import Dataset as PDataset
        from pydantic_evals.evaluators import Contains as PContains
        from pydantic_evals.evaluators import EqualsExpected, MaxDuration
    except ImportError:
        return None
    agent = _agent(cassette)

    async def task(question: str) -> str:
        return (await agent.run(question)).text

    dataset = PDataset(
        name="bench",
        cases=[PCase(name=f"c{i}", inputs=f"question {i}", expected_output=f"answer {i}")
               for i in range(n)],
        evaluators=[EqualsExpected(), PContains(value="answer"), MaxDuration(seconds=10)],
    )  # fmt: skip
    t0 = time.perf_counter()
    report = await dataset.evaluate(task, max_concurrency=CONCURRENCY, progress=False)
    took = time.perf_counter() - t0
    assert len(report.cases) == n and not report.failures
    return n / took


async def collect(quick: bool) -> list[Row]:
    """One run: our cases/s and pydantic_evals' on the same 1,000 recorded cases."""
    n = 200 if quick else CASES
    cassette = await _cassette(n)
    ours = await _ours(cassette, n)
    peer = await _peer(cassette, n)
    return [
        Row(
            f"eval of {n} recorded cases (3 evaluators, concurrency {CONCURRENCY})",
            "cases/s",
            ours,
            peer,
            "pydantic_evals",
            peer_version("pydantic-evals"),
            goal=">= 5x",
            headline=True,
        )
    ]


def main() -> None:
    runs = [asyncio.run(collect(False)) for _ in range(3)]
    rows = [r[0] for r in runs]
    ours = sorted(r.ours for r in rows)
    ratios = sorted(r.ratio or 0.0 for r in rows)
    peers = sorted(r.peer or 0.0 for r in rows)
    print(rows[0].name, f"(pydantic_evals {rows[0].peer_version})")
    print(f"cantata:        median {ours[1]:.0f} cases/s, worst {ours[0]:.0f}")
    print(f"pydantic_evals: median {peers[1]:.0f} cases/s, worst {peers[0]:.0f}")
    print(f"ratio:          median {ratios[1]:.1f}x, worst {ratios[0]:.1f}x (goal >= 5x)")


if __name__ == "__main__":
    main()
