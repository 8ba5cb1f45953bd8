"""Executors: handlers chosen by message type, function executors, declared types."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from cantata.core import WorkflowError
from cantata.workflows import (
    Executor,
    FunctionExecutor,
    WorkflowBuilder,
    WorkflowContext,
    executor,
    handler,
)


@dataclass
class Animal:
    name: str


@dataclass
class Dog(Animal):
    pass


class Sorter(Executor):
    @handler
    async def number(self, value: int, ctx: WorkflowContext[None, str]) -> None:
        await ctx.yield_output(f"int {value}")

    @handler
    async def text(self, value: str, ctx: WorkflowContext[None, str]) -> None:
        await ctx.yield_output(f"str {value}")

    @handler
    async def animal(self, value: Animal, ctx: WorkflowContext[None, str]) -> None:
        await ctx.yield_output(f"animal {value.name}")

    @handler
    async def names(self, value: list[str], ctx: WorkflowContext[None, str]) -> None:
        await ctx.yield_output(f"names {','.join(value)}")

    @handler
    async def anything(self, value: Any, ctx: WorkflowContext[None, str]) -> None:
        await ctx.yield_output(f"other {type(value).__name__}")


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        (3, "int 3"),
        ("x", "str x"),
        (Dog("rex"), "animal rex"),  # a subclass goes to the handler of its base
        (["a", "b"], "names a,b"),
        ([1, 2], "other list"),  # element types are checked
        (2.5, "other float"),
    ],
)
async def test_the_handler_is_chosen_by_the_message_type(message: object, expected: str) -> None:
    wf = WorkflowBuilder(Sorter("sorter")).build()
    assert (await wf.run(message)).outputs == [expected]


def test_declared_types_come_from_context_and_return_annotations() -> None:
    class Typed(Executor):
        @handler
        async def a(self, value: int, ctx: WorkflowContext[str | bytes, float]) -> None:
            pass

        @handler(output=dict, workflow_output=[int, str])
        async def b(self, value: str, ctx: WorkflowContext) -> None:
            pass

    t = Typed("t")
    assert t.input_types == [int, str]
    assert t.output_types == [str, bytes, dict]
    assert t.workflow_output_types == [float, int, str]

    def f(value: int) -> str:
        return str(value)

    fe = FunctionExecutor(f, id="f")
    assert (fe.id, fe.input_types, fe.output_types) == ("f", [int], [str])


async def test_returned_values_are_sent_and_sync_functions_work() -> None:
    @executor(id="twice")
    def twice(value: int) -> int:
        return value * 2

    @executor
    async def show(value: int, ctx: WorkflowContext[None, int]) -> None:
        await ctx.yield_output(value)

    wf = WorkflowBuilder(twice).add_edge(twice, show).build()
    assert (await wf.run(21)).outputs == [42]


async def test_input_without_a_handler_fails_naming_executor_and_types() -> None:
    class Picky(Executor):
        @handler
        async def take(self, value: int, ctx: WorkflowContext) -> None:
            pass

    wf = WorkflowBuilder(Picky("picky")).build()
    with pytest.raises(WorkflowError, match=r"'picky' .* cannot take a str; it takes \['int'\]"):
        await wf.run("text")


def test_executor_ids_default_to_the_class_or_function_name() -> None:
    @executor
    def my_step(value: int) -> int:
        return value

    assert my_step.id == "my_step"
    assert Sorter().id == "Sorter"


async def test_an_executor_that_overrides_execute_is_run_through_it() -> None:
    from cantata.workflows import Executor, WorkflowBuilder, handler

    class Doubling(Executor):
        @handler
        async def take(self, value: int, ctx: WorkflowContext[None, int]) -> None:
            await ctx.yield_output(value)

        async def _execute(self, message: object, ctx: WorkflowContext[object, object]) -> None:
            await super()._execute(message * 2, ctx)  # type: ignore[operator]

    assert (await WorkflowBuilder(Doubling("d")).build().run(21)).outputs == [42]
