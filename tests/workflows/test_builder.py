"""WorkflowBuilder.build(): every rule that rejects a graph, and what it accepts."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeVar

import pytest

from cantata.agents import ChatAgent
from cantata.core import ConfigurationError
from cantata.models import ScriptedChatClient
from cantata.workflows import (
    AgentExecutor,
    Case,
    Default,
    Executor,
    WorkflowBuilder,
    WorkflowContext,
    executor,
    handler,
)

T = TypeVar("T")


@dataclass
class Order:
    amount: int


class Source(Executor):
    @handler
    async def go(self, text: str, ctx: WorkflowContext[int]) -> None:
        await ctx.send_message(len(text))


class TakesInt(Executor):
    @handler
    async def take(self, value: int, ctx: WorkflowContext[None, int]) -> None:
        await ctx.yield_output(value)


class TakesOrder(Executor):
    @handler
    async def take(self, order: Order, ctx: WorkflowContext) -> None:
        pass


class TakesIntList(Executor):
    @handler
    async def take(self, values: list[int], ctx: WorkflowContext[None, int]) -> None:
        await ctx.yield_output(sum(values))


class TakesAnything(Executor):
    @handler
    async def take(self, value: Any, ctx: WorkflowContext) -> None:
        pass


class TakesUnion(Executor):
    @handler
    async def take(self, value: Order | int, ctx: WorkflowContext) -> None:
        pass


class Generic(Executor):
    @handler
    async def take(self, value: T, ctx: WorkflowContext) -> None:  # type: ignore[valid-type]
        pass


def test_duplicate_ids_are_rejected_with_both_executors_named() -> None:
    with pytest.raises(ConfigurationError, match="share the id 'x'"):
        WorkflowBuilder(Source("x")).add_edge(Source("x"), TakesInt("y"))


def test_same_executor_in_two_edges_is_fine() -> None:
    src, dst, other = Source("s"), TakesInt("t"), TakesInt("u")
    wf = WorkflowBuilder(src).add_edge(src, dst).add_edge(src, other).build()
    assert sorted(wf.executors) == ["s", "t", "u"]


def test_edge_between_incompatible_types_names_executors_and_types() -> None:
    src = Source("s")
    builder = WorkflowBuilder(src).add_edge(src, TakesOrder("o"))
    with pytest.raises(ConfigurationError) as info:
        builder.build()
    text = str(info.value)
    assert "'s' -> 'o'" in text and "int" in text and "Order" in text


def test_unreachable_executor_is_rejected() -> None:
    src = Source("s")
    builder = (
        WorkflowBuilder(src).add_edge(src, TakesInt("t")).add_edge(Source("lost"), TakesInt("u"))
    )
    with pytest.raises(ConfigurationError, match=r"\['lost', 'u'\] cannot be reached"):
        builder.build()


def test_fan_in_target_must_take_a_list() -> None:
    src = Source("s")
    a, b = Source("a"), Source("b")
    builder = WorkflowBuilder(src)
    builder.add_fan_out_edges(src, [a, b])
    with pytest.raises(ConfigurationError):
        builder.build()  # str != int: the fan-out itself is incompatible
    s2 = Source("s2")
    fan_in = WorkflowBuilder(s2)
    ints_a, ints_b = TakesIntOut("a"), TakesIntOut("b")
    fan_in.add_fan_out_edges(s2, [ints_a, ints_b]).add_fan_in_edges(
        [ints_a, ints_b], TakesInt("sum")
    )
    with pytest.raises(ConfigurationError, match=r"fan-in .* delivers a list"):
        fan_in.build()


class TakesIntOut(Executor):
    @handler
    async def take(self, value: int, ctx: WorkflowContext[int]) -> None:
        await ctx.send_message(value)


def test_fan_in_to_a_list_handler_builds() -> None:
    s = Source("s")
    a, b = TakesIntOut("a"), TakesIntOut("b")
    wf = (
        WorkflowBuilder(s)
        .add_fan_out_edges(s, [a, b])
        .add_fan_in_edges([a, b], TakesIntList("sum"))
        .build()
    )
    assert wf.edge_groups[-1].kind == "fan_in"


@pytest.mark.parametrize("target", [TakesAnything("t"), TakesUnion("t"), Generic("t")])
def test_any_unions_and_generic_executors_are_accepted(target: Executor) -> None:
    s = Source("s")
    WorkflowBuilder(s).add_edge(s, target).build()


def test_switch_needs_a_default_last() -> None:
    s = Source("s")
    with pytest.raises(ConfigurationError, match="Default"):
        WorkflowBuilder(s).add_switch_case_edges(s, [Case(lambda v: v > 1, TakesInt("a"))])
    wf = (
        WorkflowBuilder(s)
        .add_switch_case_edges(s, [Case(lambda v: v > 1, TakesInt("a")), Default(TakesInt("b"))])
        .build()
    )
    assert wf.edge_groups[0].targets == ("a", "b")


def test_agents_are_wrapped_once_in_agent_executors() -> None:
    agent = ChatAgent(ScriptedChatClient(["hi"]), name="writer")
    other = ChatAgent(ScriptedChatClient(["hi"]), name="editor")
    wf = WorkflowBuilder(agent).add_edge(agent, other).build()
    assert isinstance(wf.executors["writer"], AgentExecutor)
    assert wf.executors["writer"].agent is agent  # type: ignore[attr-defined]
    assert list(wf.executors) == ["writer", "editor"]


def test_non_executor_is_rejected_with_the_fix() -> None:
    with pytest.raises(ConfigurationError, match="@executor"):
        WorkflowBuilder(object())


def test_executor_without_handler_is_rejected() -> None:
    class Empty(Executor):
        pass

    with pytest.raises(ConfigurationError, match="has no handler"):
        WorkflowBuilder(Empty("e")).build()


def test_handler_without_annotation_is_rejected() -> None:
    with pytest.raises(ConfigurationError, match="annotate parameter"):

        @executor
        def bad(message):  # type: ignore[no-untyped-def]
            return message


def test_workflow_is_immutable_and_reports_types() -> None:
    s = Source("s")
    wf = WorkflowBuilder(s, name="w").add_edge(s, TakesInt("t")).build()
    with pytest.raises(TypeError):
        wf.executors["x"] = s  # type: ignore[index]
    with pytest.raises(ConfigurationError, match="immutable"):
        wf.max_supersteps = 5
    assert wf.input_types == [str]
    assert wf.output_types == [int]


def test_invalid_options_are_rejected() -> None:
    with pytest.raises(ConfigurationError):
        WorkflowBuilder(Source("s"), max_supersteps=0)
    with pytest.raises(ConfigurationError):
        WorkflowBuilder(Source("s"), placement="cluster")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="invalid"):
        Source("has space")
