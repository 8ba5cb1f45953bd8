"""Every evaluator on hand-made outcomes: what passes, what fails, the score and the reason;
the routing evaluator also on a real team's routing decisions."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from cantata.agents import ChatAgent
from cantata.core import Usage
from cantata.evals import (
    Case,
    Contains,
    EvalContext,
    EvalResult,
    Exact,
    FunctionEvaluator,
    JsonSchema,
    MaxLatency,
    MaxUsage,
    Regex,
    Routing,
    RunOutcome,
    ToolCall,
    Trajectory,
    evaluate,
    evaluator,
)
from cantata.models import ScriptedChatClient, tool_call
from cantata.teams import GroupChat, Handoff
from cantata.teams.routing_eval import LabelledTask, evaluate_routing


def ctx(output: str = "", expected: Any = None, **outcome: Any) -> EvalContext:
    return EvalContext(Case("c", "in", expected), RunOutcome(output=output, **outcome))


def test_exact_text_and_data() -> None:
    assert Exact().evaluate(ctx(" Paris\n", "Paris")).passed
    verdict = Exact().evaluate(ctx("paris", "Paris"))
    assert not verdict.passed and verdict.score == 0 and "expected 'Paris'" in verdict.reason
    assert Exact(ignore_case=True).evaluate(ctx("paris", "Paris")).passed
    assert not Exact(strip=False).evaluate(ctx("Paris ", "Paris")).passed
    assert Exact(value="ok").evaluate(ctx("ok", "other")).passed
    assert Exact().evaluate(ctx('{"a": [1, 2]}', {"a": [1, 2]})).passed
    assert not Exact().evaluate(ctx('{"a": [1]}', {"a": [1, 2]})).passed

    class Point(BaseModel):
        x: int

    assert Exact().evaluate(ctx("", {"x": 3}, value=Point(x=3))).passed
    assert "no expected output" in Exact().evaluate(ctx("x")).reason


def test_contains_all_any_and_partial_score() -> None:
    assert Contains().evaluate(ctx("the capital is Paris", "Paris")).passed
    partial = Contains(text=["Paris", "France", "Seine"]).evaluate(ctx("Paris, France"))
    assert not partial.passed and partial.score == pytest.approx(2 / 3)
    assert "missing 'Seine'" in partial.reason
    assert Contains(text=["x", "France"], any_of=True).evaluate(ctx("Paris, France")).passed
    assert Contains(text="PARIS", ignore_case=True).evaluate(ctx("paris")).passed
    assert not Contains().evaluate(ctx("anything")).passed


def test_regex_search_and_full_match() -> None:
    assert Regex(pattern=r"\d+").evaluate(ctx("there are 42")).passed
    assert not Regex(pattern=r"\d+", full_match=True).evaluate(ctx("there are 42")).passed
    assert Regex(pattern="^yes$", ignore_case=True).evaluate(ctx("YES")).passed
    assert "does not match" in Regex(pattern="^no").evaluate(ctx("yes")).reason


def test_json_schema_on_text_and_on_structured_output() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    check = JsonSchema(schema=schema)
    assert check.evaluate(ctx('{"n": 3}')).passed
    bad = check.evaluate(ctx('{"n": "three"}'))
    assert not bad.passed and bad.reason.startswith("n: 'three' is not of type 'integer'")
    assert "not of type 'object'" in check.evaluate(ctx("not json")).reason
    assert check.evaluate(ctx("ignored", value={"n": 1})).passed


CALLS = [
    ToolCall("search", {"q": "paris", "limit": 3}),
    ToolCall("log", {"level": "info"}),
    ToolCall("search", {"q": "lyon"}),
]


@pytest.mark.parametrize(
    ("trajectory", "passed", "score"),
    [
        (Trajectory(calls=["search", "search"]), True, 1.0),  # type: ignore[list-item]
        (Trajectory(calls=["log", "search", "log"]), False, 2 / 3),  # type: ignore[list-item]
        (Trajectory(calls=["search", "log"], order="exact"), False, 1.0),  # type: ignore[list-item]
        (Trajectory(calls=["search", "log", "search"], order="exact"), True, 1.0),  # type: ignore[list-item]
        (Trajectory(calls=["log", "search"], order="in_order"), True, 1.0),  # type: ignore[list-item]
        (Trajectory(calls=["search", "log"], order="any_order"), True, 1.0),  # type: ignore[list-item]
        (Trajectory(calls=["search", "search", "search"], order="any_order"), False, 2 / 3),  # type: ignore[list-item]
    ],
)
def test_trajectory_orders(trajectory: Trajectory, passed: bool, score: float) -> None:
    verdict = trajectory.evaluate(ctx(tool_calls=CALLS))
    assert (verdict.passed, verdict.score) == (passed, pytest.approx(score))


def test_trajectory_arguments_subset_equal_and_any_order_matching() -> None:
    subset = Trajectory.model_validate({"calls": [{"name": "search", "arguments": {"q": "paris"}}]})
    assert subset.evaluate(ctx(tool_calls=CALLS)).passed
    equal = subset.model_copy(update={"arguments": "equal"})
    assert not equal.evaluate(ctx(tool_calls=CALLS)).passed  # the call had limit too
    wrong = Trajectory.model_validate({"calls": [{"name": "search", "arguments": {"q": "nice"}}]})
    assert "0 of 1 expected calls" in wrong.evaluate(ctx(tool_calls=CALLS)).reason
    # A loose expected call listed first must not take the only call the specific one fits.
    both = Trajectory.model_validate(
        {"calls": ["search", {"name": "search", "arguments": {"q": "lyon"}}], "order": "any_order"}
    )
    assert both.evaluate(ctx(tool_calls=[CALLS[2], CALLS[0]])).passed
    assert Trajectory(calls=[], order="exact").evaluate(ctx()).passed
    assert not Trajectory(calls=[], order="exact").evaluate(ctx(tool_calls=CALLS)).passed


def test_latency_and_usage_bounds() -> None:
    assert MaxLatency(seconds=1).evaluate(ctx(latency=0.5)).passed
    assert "took 1.500 s" in MaxLatency(seconds=1).evaluate(ctx(latency=1.5)).reason
    usage = Usage(100, 20)
    assert (
        MaxUsage(total_tokens=120, tool_calls=3).evaluate(ctx(usage=usage, tool_calls=CALLS)).passed
    )
    over = MaxUsage(input_tokens=50, output_tokens=50, tool_calls=2).evaluate(
        ctx(usage=usage, tool_calls=CALLS)
    )
    assert not over.passed and over.reason == "input_tokens 100 > 50; tool_calls 3 > 2"


async def test_functions_as_evaluators() -> None:
    @evaluator
    def short(c: EvalContext) -> bool:
        return len(c.output) < 5

    @evaluator(name="polite", threshold=0.8)
    async def politeness(c: EvalContext) -> float:
        return 0.9 if "please" in c.output else 0.1

    def whole(c: EvalContext) -> EvalResult:
        return EvalResult("whole", True, 0.7, "fine")

    assert short.name == "short" and short.evaluate(ctx("hey")) == EvalResult("short", True, 1.0)
    assert not short.evaluate(ctx("too long")).passed  # type: ignore[union-attr]
    assert (await politeness.evaluate(ctx("please"))) == EvalResult("polite", True, 0.9)  # type: ignore[misc]
    assert not (await politeness.evaluate(ctx("no"))).passed  # type: ignore[misc, union-attr]
    assert FunctionEvaluator(whole).evaluate(ctx()) == EvalResult("whole", True, 0.7, "fine")
    odd = FunctionEvaluator(lambda c: "yes", name="odd").evaluate(ctx())
    assert not odd.passed and "return a bool" in odd.reason  # type: ignore[union-attr]


def _triage() -> Handoff:
    def route(messages: list[Any], options: Any) -> object:
        task = next(m.text for m in messages if m.role == "user")
        if "invoice" in task:
            return [tool_call("transfer_to_billing", {"summary": task})]
        return "I can answer that myself."

    def specialist(name: str) -> ChatAgent:
        return ChatAgent(ScriptedChatClient(lambda m, o: f"{name} answers"), name=name)

    return Handoff(
        [ChatAgent(ScriptedChatClient(route), name="triage"), specialist("billing"),
         specialist("tech")],
        handoffs={"triage": ["billing", "tech"]},
        max_turns=3,
    )  # fmt: skip


async def test_routing_agrees_with_evaluate_routing_on_a_real_team() -> None:
    team = _triage()
    tasks = ["invoice 7 is wrong", "what is the weather"]
    reference = await evaluate_routing(team, [LabelledTask(t, "billing") for t in tasks])
    report = await evaluate(
        team,
        [Case(t, t) for t in tasks],
        evaluators=[
            Routing(first="billing"),
            Routing(speakers=["triage", "billing"], order="exact"),
        ],
    )
    assert [r.passed for r in report.results] == [o.correct for o in reference.outcomes]
    assert report.results[0].speakers == ["triage", "billing"]
    assert report.results[1].speakers == ["triage"]
    assert "routed first to None" in report.results[1].scores[0].reason
    assert "speakers ['triage'], expected" in report.results[1].scores[1].reason


async def test_routing_fails_a_run_that_its_limit_stopped() -> None:
    team = GroupChat(
        [ChatAgent(ScriptedChatClient([f"{n} here"] * 9), name=n) for n in ("a", "b")],
        max_turns=3,
    )
    report = await evaluate(team, [Case("t", "go")], evaluators=[Routing(speakers=["a", "b"])])
    (result,) = report.results
    assert result.speakers == ["a", "b", "a"]
    assert not result.passed and "stopped by its limit (max_turns)" in result.failures[0]
    allowed = Routing(speakers=["a", "b"], allow_limit_stop=True)
    again = await evaluate(team, [Case("t", "go")], evaluators=[allowed])
    assert again.results[0].passed
