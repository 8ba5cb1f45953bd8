"""build()'s errors carry structured fields; an edge drawn twice is refused."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from cantata.core import ConfigurationError
from cantata.workflows import (
    Case,
    Default,
    Executor,
    WorkflowBuilder,
    WorkflowContext,
    WorkflowValidationError,
    handler,
)


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
    async def take(self, order: Order) -> None:
        return None


class Fork(Executor):
    @handler
    async def go(self, text: str, ctx: WorkflowContext[str]) -> None:
        await ctx.send_message(text)


class NoHandler(Executor):
    pass


def test_the_same_edge_twice_is_refused_naming_both_executors() -> None:
    src, dst = Source("s"), TakesInt("t")
    builder = WorkflowBuilder(src).add_edge(src, dst).add_edge(src, dst)
    with pytest.raises(WorkflowValidationError, match="'s' -> 't'") as caught:
        builder.build()
    assert caught.value.problem == "duplicate_edge"
    assert caught.value.executor_ids == ("s", "t")
    assert caught.value.fields == {
        "problem": "duplicate_edge",
        "executor_ids": ("s", "t"),
        "types": (),
    }


@pytest.mark.parametrize(
    "draw",
    [
        lambda b, s, t, u: b.add_edge(s, t).add_fan_out_edges(s, [t, u]),
        lambda b, s, t, u: b.add_fan_out_edges(s, [t, u, t]),
        lambda b, s, t, u: b.add_edge(s, t, condition=lambda m: m > 1).add_edge(
            s, t, condition=lambda m: m <= 1
        ),
        lambda b, s, t, u: b.add_edge(s, u).add_switch_case_edges(
            s, [Case(lambda m: m > 1, t), Default(u)]
        ),
    ],
)
def test_an_edge_drawn_in_two_groups_is_refused(draw: object) -> None:
    s, t, u = Source("s"), TakesInt("t"), TakesInt("u")
    builder = draw(WorkflowBuilder(s), s, t, u)  # type: ignore[operator]
    with pytest.raises(WorkflowValidationError) as caught:
        builder.build()
    assert caught.value.problem == "duplicate_edge"
    assert caught.value.executor_ids[0] == "s"


def test_a_switch_may_name_one_target_in_two_branches() -> None:
    s, t = Source("s"), TakesInt("t")
    WorkflowBuilder(s).add_switch_case_edges(s, [Case(lambda m: m > 1, t), Default(t)]).build()


async def test_a_message_on_a_duplicate_free_graph_is_delivered_once() -> None:
    s, t = Source("s"), TakesInt("t")
    wf = WorkflowBuilder(s).add_switch_case_edges(s, [Case(lambda m: m > 9, t), Default(t)])
    assert (await wf.build().run("abc")).outputs == [3]


def test_incompatible_edge_names_executors_and_types() -> None:
    src = Source("s")
    with pytest.raises(WorkflowValidationError) as caught:
        WorkflowBuilder(src).add_edge(src, TakesOrder("o")).build()
    err = caught.value
    assert err.problem == "incompatible_edge"
    assert err.executor_ids == ("s", "o")
    assert int in err.types and Order in err.types
    assert isinstance(err, ConfigurationError)


def test_unreachable_and_no_handler_carry_their_executors() -> None:
    src = Source("s")
    with pytest.raises(WorkflowValidationError) as caught:
        WorkflowBuilder(src).add_edge(TakesInt("x"), TakesInt("y")).build()
    assert caught.value.problem == "unreachable"
    assert caught.value.executor_ids == ("s", "x", "y")
    with pytest.raises(WorkflowValidationError) as caught:
        WorkflowBuilder(NoHandler("n")).build()
    assert (caught.value.problem, caught.value.executor_ids) == ("no_handler", ("n",))


def test_fan_in_type_and_twice_named_source_carry_their_executors() -> None:
    fork, a, b = Fork("f"), Source("a"), Source("b")
    builder = WorkflowBuilder(fork).add_fan_out_edges(fork, [a, b])
    with pytest.raises(WorkflowValidationError) as caught:
        builder.add_fan_in_edges([a, b], TakesInt("j")).build()
    assert caught.value.problem == "fan_in_type"
    assert caught.value.executor_ids == ("a", "b", "j")
    assert int in caught.value.types
    with pytest.raises(WorkflowValidationError) as caught:
        WorkflowBuilder(a).add_fan_in_edges([a, b, a], TakesInt("j"))
    assert (caught.value.problem, caught.value.executor_ids) == ("duplicate_edge", ("a",))
