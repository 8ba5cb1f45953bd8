"""The runner on every kind of target (an agent with tools, a team, a workflow, a
function), its concurrency bound, repeats, timeouts, and failures kept as results."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from cantata.agents import ChatAgent
from cantata.core import ConfigurationError, Message, Usage
from cantata.evals import (
    Case,
    Contains,
    Dataset,
    EvalContext,
    Exact,
    Judge,
    MaxUsage,
    Trajectory,
    evaluate,
    evaluate_sync,
    evaluator,
)
from cantata.models import ChatOptions, ScriptedChatClient, tool_call
from cantata.tools import tool
from cantata.workflows import AgentExecutorResponse, WorkflowBuilder, WorkflowContext, executor


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def adder() -> ChatAgent:
    def answer(messages: list[Message], options: ChatOptions) -> object:
        last = messages[-1]
        if last.role == "tool":
            return f"the sum is {last.function_results[0].result}"
        a, b = (int(x) for x in last.text.split()[1:3])
        return [tool_call("add", {"a": a, "b": b})]

    client = ScriptedChatClient(answer, usage=Usage(10, 2))
    return ChatAgent(client, name="adder", tools=[add])


async def test_an_agent_with_tools_is_judged_on_its_answer_calls_and_usage() -> None:
    data = Dataset(
        [
            Case("small", "sum 1 2", "3", evaluators=(Trajectory.model_validate(
                {"calls": [{"name": "add", "arguments": {"a": 1, "b": 2}}]}),)),
            Case("large", "sum 40 2", "42"),
            Case("wrong", "sum 2 2", "5"),
        ],
        evaluators=[Contains(), MaxUsage(total_tokens=24, tool_calls=1)],
    )  # fmt: skip
    report = await evaluate(adder(), data)
    assert report.target == "adder" and report.name == "dataset"
    assert [r.passed for r in report.results] == [True, True, False]
    small = report.results[0]
    assert small.output == "the sum is 3"
    assert [(c.name, dict(c.arguments)) for c in small.tool_calls] == [("add", {"a": 1, "b": 2})]
    assert small.usage == Usage(20, 4)  # two model calls
    assert [s.evaluator for s in small.scores] == ["contains", "max_usage", "trajectory"]
    assert report.results[2].failures == ["contains: missing '5'"]
    assert report.pass_rate == pytest.approx(2 / 3) and report.usage == Usage(60, 12)


async def test_a_workflow_is_read_from_its_output_and_its_agents_events() -> None:
    agent = adder()

    @executor
    async def done(response: AgentExecutorResponse, ctx: WorkflowContext[None, str]) -> None:
        await ctx.yield_output(response.agent_response.text.upper())

    workflow = WorkflowBuilder(agent).add_edge(agent, done).build()
    report = await evaluate(workflow, [Case("w", "sum 3 4", "THE SUM IS 7")], evaluators=[Exact()])
    (result,) = report.results
    assert result.passed, result.failures
    assert [c.name for c in result.tool_calls] == ["add"] and result.usage == Usage(20, 4)


def test_a_function_target_and_messages_as_input() -> None:
    seen: list[Any] = []

    def echo(value: Any) -> Any:
        seen.append(value)
        return {"echo": value}

    report = evaluate_sync(
        echo,
        [Case("data", {"n": 1}, {"echo": {"n": 1}}), Case("text", "hi", {"echo": "hi"})],
        evaluators=[Exact()],
    )
    assert report.pass_rate == 1.0 and seen == [{"n": 1}, "hi"]

    agent_seen: list[list[str]] = []

    def record(messages: list[Message], options: ChatOptions) -> str:
        agent_seen.append([f"{m.role}:{m.text}" for m in messages])
        return "ok"

    conversation = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"},
                    {"role": "user", "content": "c"}]  # fmt: skip
    evaluate_sync(ChatAgent(ScriptedChatClient(record)), [Case("conv", conversation)])
    assert agent_seen == [["user:a", "assistant:b", "user:c"]]


async def test_concurrency_is_a_bound_and_repeats_run_every_case_again() -> None:
    running = peak = 0
    calls: list[str] = []

    async def slow(value: str) -> str:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        calls.append(value)
        await asyncio.sleep(0.005)
        running -= 1
        return value

    cases = [Case(f"c{n}", f"v{n}", f"v{n}") for n in range(12)]
    report = await evaluate(slow, cases, evaluators=[Exact()], concurrency=3, repeats=2)
    assert peak == 3
    assert report.runs == 24 and report.repeats == 2 and report.concurrency == 3
    assert sorted(calls) == sorted([c.input for c in cases] * 2)
    assert [(r.case, r.repeat) for r in report.results][:4] == [
        ("c0", 0), ("c0", 1), ("c1", 0), ("c1", 1),
    ]  # fmt: skip
    assert all(s.runs == 2 and s.pass_rate == 1 for s in report.cases().values())
    peak = 0
    one = await evaluate(slow, cases[:4], concurrency=1)
    assert peak == 1 and one.runs == 4


async def test_failures_and_timeouts_are_results_not_exceptions() -> None:
    async def flaky(value: str) -> str:
        if value == "boom":
            raise ValueError("no such thing")
        if value == "slow":
            await asyncio.sleep(5)
        return value

    @evaluator
    def broken(c: EvalContext) -> bool:
        raise KeyError("oops")

    report = await evaluate(
        flaky,
        [Case("ok", "fine", "fine"), Case("boom", "boom"), Case("slow", "slow")],
        evaluators=[Exact(), broken],
        timeout=0.05,
    )
    ok, boom, slow = report.results
    assert ok.scores[0].passed and not ok.passed
    assert ok.failures == ["broken: the evaluator raised KeyError: 'oops'"]
    assert boom.error == "ValueError: no such thing" and boom.scores == [] and boom.score == 0
    assert slow.error == "timed out after 0.05 s"
    assert report.errors == 2 and report.passed == 0


async def test_bad_arguments_are_refused_before_anything_runs() -> None:
    ran: list[str] = []
    cases = [Case("a", "x")]
    for kwargs in ({"concurrency": 0}, {"repeats": 0}, {"timeout": -1.0}, {"concurrency": True}):
        with pytest.raises(ConfigurationError):
            await evaluate(ran.append, cases, **kwargs)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="judge evaluator has no model"):
        await evaluate(ran.append, cases, evaluators=[Judge("is it good")])
    with pytest.raises(ConfigurationError, match="not an evaluator"):
        await evaluate(ran.append, cases, evaluators=["exact"])  # type: ignore[list-item]
    with pytest.raises(ConfigurationError, match="cannot evaluate int"):
        await evaluate(3, cases)  # type: ignore[arg-type]
    assert ran == []
