"""`cantata eval` through typer's CliRunner: an eval on a module:object target and on a
component config that replays a cassette, the JSON and HTML reports, --compare's exit code,
--from-recording, --fail-under, and one-line errors."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from typer.testing import CliRunner

from cantata.agents import ChatAgent
from cantata.cli import app
from cantata.evals import EvalReport
from cantata.models import RecordingChatClient, ScriptedChatClient

runner = CliRunner()

TARGET = """
from cantata.agents import ChatAgent
from cantata.models import ScriptedChatClient

def answer(messages, options):
    text = messages[-1].text
    return "Paris" if "France" in text else "I do not know"

geo = ChatAgent(ScriptedChatClient(answer), name="geo")

def polite(ctx):
    return not ctx.output.startswith("I do not")
"""

DATASET = """
name: capitals
evaluators: [exact]
cases:
  - name: fr
    input: Capital of France?
    expected: Paris
  - name: it
    input: Capital of Italy?
    expected: Rome
"""


def _files(tmp_path: Path) -> tuple[Path, Path]:
    (tmp_path / "geo.py").write_text(TARGET)
    (tmp_path / "capitals.yaml").write_text(DATASET)
    return tmp_path / "capitals.yaml", tmp_path / "geo.py"


def test_an_eval_prints_a_table_and_writes_json_and_html(tmp_path: Path) -> None:
    dataset, target = _files(tmp_path)
    out, page = tmp_path / "r" / "report.json", tmp_path / "r" / "report.html"
    result = runner.invoke(app, [
        "eval", str(dataset), f"{target}:geo", "--json", str(out), "--html", str(page),
        "-e", "contains: a", "--function", f"{target}:polite", "-c", "2", "-n", "2",
    ])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "capitals on geo: 2/4 runs passed (50%)" in result.output
    assert "exact: expected 'Rome', got 'I do not" in result.output
    report = EvalReport.load(out)
    assert report.runs == 4 and report.repeats == 2 and report.concurrency == 2
    assert [s.evaluator for s in report.results[0].scores] == ["exact", "contains", "polite"]
    assert "<h1>capitals</h1>" in page.read_text()
    failing = runner.invoke(app, ["eval", str(dataset), f"{target}:geo", "--fail-under", "0.9"])
    assert (
        failing.exit_code == 1 and "pass rate 50.0% is under --fail-under 90.0%" in failing.output
    )


def test_compare_exits_one_on_a_regression(tmp_path: Path) -> None:
    dataset, target = _files(tmp_path)
    old, new = tmp_path / "old.json", tmp_path / "new.json"
    assert (
        runner.invoke(app, ["eval", str(dataset), f"{target}:geo", "--json", str(old)]).exit_code
        == 0
    )
    (tmp_path / "geo.py").write_text(TARGET.replace('"Paris"', '"Lyon"'))
    assert (
        runner.invoke(app, ["eval", str(dataset), f"{target}:geo", "--json", str(new)]).exit_code
        == 0
    )
    worse = runner.invoke(app, ["eval", "--compare", str(old), str(new)])
    assert worse.exit_code == 1, worse.output
    assert "regressed" in worse.output and "fr" in worse.output and "100% → 0%" in worse.output
    same = runner.invoke(app, ["eval", "--compare", str(old), str(old)])
    assert same.exit_code == 0 and "0 regressed" in same.output


def test_a_recording_becomes_a_dataset_that_a_replaying_config_passes(tmp_path: Path) -> None:
    cassette = tmp_path / "traffic.json"
    recorder = RecordingChatClient(ScriptedChatClient(["Paris", "Rome"]), cassette)
    served = ChatAgent(recorder, name="geo")

    async def record() -> None:
        await served.run("Capital of France?")
        await served.run("Capital of Italy?")

    asyncio.run(record())
    dataset = tmp_path / "traffic.jsonl"
    made = runner.invoke(app, ["eval", "--from-recording", str(cassette), "--out", str(dataset)])
    assert made.exit_code == 0 and "2 cases written" in made.output
    assert [json.loads(line)["expected"] for line in dataset.read_text().splitlines()] == [
        "Paris", "Rome"
    ]  # fmt: skip
    config = tmp_path / "replay.json"
    config.write_text(json.dumps({"provider": "cantata.agents.ChatAgent", "config": {
        "name": "geo",
        "client": {"provider": "cantata.models.ReplayChatClient",
                   "config": {"path": str(cassette)}}}}))  # fmt: skip
    result = runner.invoke(app, ["eval", str(dataset), str(config), "-e", "exact"])
    assert result.exit_code == 0, result.output
    assert "traffic on geo: 2/2 runs passed (100%)" in result.output


def test_mistakes_are_one_line_errors(tmp_path: Path) -> None:
    dataset, target = _files(tmp_path)
    (tmp_path / "bad.yaml").write_text("cases: [{input: x, evaluators: [exakt]}]")
    for args, says in [
        (["eval"], "give a dataset and a target"),
        (["eval", str(tmp_path / "bad.yaml"), f"{target}:geo"], "unknown evaluator 'exakt'"),
        (["eval", str(dataset), f"{target}:nothing"], "has no attribute 'nothing'"),
        (["eval", str(dataset), f"{target}:geo", "-e", "regex: '('"], "not a valid regular"),
        (
            ["eval", str(dataset), f"{target}:geo", "-e", "judge: nice"],
            "judge evaluator has no model",
        ),
        (["eval", "--from-recording", str(dataset)], "needs --out"),
        (["eval", "--compare", str(dataset), str(dataset)], "is not JSON"),
    ]:
        result = runner.invoke(app, args)
        assert result.exit_code == 1, (args, result.output)
        assert says in result.output and "Traceback" not in result.output, result.output
