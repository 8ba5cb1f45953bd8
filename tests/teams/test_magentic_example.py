"""examples/magentic_files.py runs: on a scripted model (every step checked) and on the
embedded model (the plan is reviewed, a file is read, a line of code runs, the run ends)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from cantata.core import Message
from cantata.models import ChatOptions, ScriptedChatClient, tool_call

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "magentic_files.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("magentic_files_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _play(messages: list[Message], options: ChatOptions) -> Any:
    """Plays the manager (by the format asked for) and both specialists (by their
    instructions); the next speaker is the first the schema allows."""
    fmt = options.response_format
    if fmt is not None:
        name = fmt.__name__  # type: ignore[union-attr]
        if name == "_FewFacts":
            return json.dumps({"facts": ["notes.txt holds two numbers"]})
        if name == "PlanOut":
            return json.dumps({"steps": [{"agent": "file_reader", "action": "read"}]})
        if name == "_Final":
            return json.dumps({"answer": "6 * 7 = 42"})
        answer = fmt.model_json_schema()["properties"]["next_speaker"]  # type: ignore[union-attr]
        speaker = answer["enum"][0] if "enum" in answer else answer["const"]
        done = any("exit code 0" in m.text for m in messages)
        return json.dumps(
            {
                "is_request_satisfied": done,
                "is_in_loop": False,
                "is_progress_being_made": True,
                "next_speaker": speaker,
                "instruction_or_question": "do your step",
            }
        )
    system, last = messages[0].text, messages[-1]
    if last.role == "tool":
        return f"Result: {last.function_results[0].result}"
    if "read files" in system:
        return [tool_call("read_file", {"path": "notes.txt"})]
    if "run Python" in system:
        return [tool_call("run_python", {"code": "print(6 * 7)"})]
    raise AssertionError(f"unexpected request for {system!r}")


async def test_the_example_reads_the_file_and_runs_code(capsys: Any) -> None:
    result = await _load().main(client=ScriptedChatClient(_play))
    texts = [(m.author_name, m.text) for m in result.messages]
    assert ("file_reader", "Result: The two numbers are 6 and 7.\n") in texts
    assert ("coder", "Result: exit code 0\nstdout:\n42") in texts
    assert texts[-1] == ("orchestrator", "6 * 7 = 42")
    assert result.stop_message is not None and result.stop_message.source == "satisfied"
    printed = capsys.readouterr().out
    assert "plan for review" in printed and "reviewer: approved" in printed


@pytest.mark.local_model
async def test_on_the_local_model_a_file_is_read_and_code_runs(tmp_path: Path) -> None:
    from cantata.models import LocalChatClient
    from cantata.teams.magentic import PlanReview, PlanReviewAnswer
    from cantata.tools import LocalCodeExecutor
    from cantata.workflows import InMemoryCheckpointStore, RequestInfoEvent

    example = _load()
    (tmp_path / "notes.txt").write_text("The two numbers are 6 and 7.\n")
    async with LocalCodeExecutor(timeout=10) as executor:
        team = example.build_team(LocalChatClient(), tmp_path, executor)
        session = team.create_session(checkpoint_store=InMemoryCheckpointStore())
        events = [e async for e in session.run_stream(example.TASK)]
        reviews = [e for e in events if isinstance(e, RequestInfoEvent)]
        assert len(reviews) == 1 and isinstance(reviews[0].data, PlanReview)
        answer = PlanReviewAnswer(plan=example.REVIEWED_PLAN)
        result = await session.send_responses({reviews[0].request_id: answer})
        saved = json.dumps(await session.save_state())
    speakers = [m.author_name for m in result.messages]
    assert "file_reader" in speakers and "coder" in speakers
    # The whole history (tool traffic included) is in the saved state: the file's text came
    # back from read_file (the task does not hold it), and the coder's code ran in the child.
    assert "The two numbers are 6 and 7." in saved
    assert "exit code" in saved or "timed out (killed)" in saved
    # a real end: satisfied, or a limit
    assert result.stop_message is not None
    assert result.stop_message.source in {"satisfied", "max_rounds", "max_stalls"}
