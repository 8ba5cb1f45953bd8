"""Workflow specs: agent steps, edges with conditions, fan-out, fan-in, switch."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from cantata.cli import app
from cantata.core import ConfigurationError
from cantata.declarative import SpecError, to_config, workflow_agents
from cantata.declarative import load as load_spec
from cantata.workflows import Workflow


def _step(name: str, *answers: str, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "model": {"api": "scripted", "connection": {"script": list(answers)}},
        **extra,
    }


def _spec(executors: list[dict[str, Any]], edges: list[dict[str, Any]]) -> dict[str, Any]:
    return {"version": 1, "type": "workflow", "name": "w", "start": executors[0]["name"],
            "executors": executors, "edges": edges}  # fmt: skip


async def _answers(workflow: Workflow, task: str) -> list[str]:
    run = await workflow.run(task)
    return [getattr(o, "text", str(o)) for o in run.outputs]


@pytest.mark.parametrize(("verdict", "last"), [("GOOD", "published"), ("meh", "fixed")])
async def test_switch_routes_on_the_text(verdict: str, last: str) -> None:
    spec = _spec(
        [_step("writer", "draft"), _step("judge", verdict), _step("fixer", "fixed"),
         _step("publisher", "published")],
        [{"from": "writer", "to": "judge"},
         {"from": "judge", "switch": [{"when": {"contains": "GOOD"}, "to": "publisher"},
                                      {"default": "fixer"}]}],
    )  # fmt: skip
    workflow = load_spec(spec)
    assert await _answers(workflow, "go") == [last]
    assert {a.name for a in workflow_agents(workflow)} == {"writer", "judge", "fixer", "publisher"}


async def test_conditional_edges() -> None:
    spec = _spec(
        [_step("a", "yes please"), _step("b", "from b"), _step("c", "from c")],
        [{"from": "a", "to": "b", "when": {"contains": "yes"}},
         {"from": "a", "to": "c", "when": {"not_contains": "yes"}}],
    )  # fmt: skip
    assert await _answers(load_spec(spec), "go") == ["from b"]


async def test_fan_out_and_fan_in() -> None:
    spec = _spec(
        [_step("split", "topic"), _step("x", "from x"), _step("y", "from y"),
         _step("join", "joined")],
        [{"from": "split", "fan_out": ["x", "y"]}, {"fan_in": ["x", "y"], "to": "join"}],
    )  # fmt: skip
    workflow = load_spec(spec)
    run = await workflow.run("go")
    assert [getattr(o, "text", None) for o in run.outputs] == ["joined"]


@pytest.mark.parametrize(
    ("edges", "match"),
    [
        ([{"from": "a", "to": "nope"}], "'nope' is not a step"),
        ([{"from": "a", "to": "b", "when": {"regex": ".*"}}], "regex"),
        ([{"from": "a", "to": "b", "when": {}}], "'when' must be"),
        ([{"from": "a", "switch": [{"when": {"contains": "x"}, "to": "b"}]}], "Default"),
        ([{"from": "a", "fan_out": []}], "non-empty list"),
    ],
)
def test_bad_edges_name_the_problem(edges: list[dict[str, Any]], match: str) -> None:
    with pytest.raises(ConfigurationError, match=match):
        load_spec(_spec([_step("a"), _step("b")], edges))


def test_start_must_be_a_step_and_code_workflows_do_not_dump() -> None:
    spec = _spec([_step("a")], [])
    spec["start"] = "zz"
    with pytest.raises(SpecError, match="start 'zz'"):
        load_spec(spec)
    spec["start"] = "a"
    with pytest.raises(SpecError, match="workflow spec"):
        to_config(load_spec(spec))


def test_cantata_run_workflow_with_checkpoints_and_resume(tmp_path: Path) -> None:
    import yaml

    spec = _spec([_step("a", "first"), _step("b", "second")], [{"from": "a", "to": "b"}])
    path = tmp_path / "w.yaml"
    path.write_text(yaml.safe_dump(spec), encoding="utf-8")
    url = f"sqlite:///{tmp_path / 'w.db'}"
    runner = CliRunner()
    result = runner.invoke(app, ["run", str(path), "go", "--store", url])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[:2] == ["[a]", "first"] and "[b]" in lines and "second" in lines
    checkpoints = [x.split(": ")[1] for x in lines if x.startswith("checkpoint: ")]
    assert len(checkpoints) >= 2
    again = runner.invoke(app, ["run", str(path), "--store", url, "--resume", checkpoints[0]])
    assert again.exit_code == 0, again.output
    assert "[b]" in again.output and "[a]" not in again.output
