"""to_mermaid / to_dot draw every executor and edge."""

from __future__ import annotations

from cantata.workflows import Case, Default, WorkflowBuilder, WorkflowContext, executor


@executor
async def start(value: int, ctx: WorkflowContext[int]) -> None:
    await ctx.send_message(value)


@executor
async def a(value: int, ctx: WorkflowContext[int]) -> None:
    await ctx.send_message(value)


@executor
async def b(value: int, ctx: WorkflowContext[int]) -> None:
    await ctx.send_message(value)


@executor
async def join(values: list[int], ctx: WorkflowContext) -> None:
    pass


def _workflow():  # type: ignore[no-untyped-def]
    return (
        WorkflowBuilder(start, name='my "flow"')
        .add_switch_case_edges(start, [Case(lambda v: v > 0, a), Default(b)])
        .add_fan_in_edges([a, b], join)
        .build()
    )


def test_mermaid() -> None:
    text = _workflow().to_mermaid()
    assert text.startswith("flowchart TD\n")
    assert '  n_start(["start"])' in text
    assert "  n_start -->|case 0| n_a" in text
    assert "  n_start -->|default| n_b" in text
    assert "  n_a -->|fan-in| n_join" in text and "  n_b -->|fan-in| n_join" in text


def test_dot() -> None:
    text = _workflow().to_dot()
    assert text.startswith("digraph \"my 'flow'\" {")
    assert 'n_start [label="start", shape=doublecircle];' in text
    assert 'n_a -> n_join [label="fan-in"];' in text
    assert text.rstrip().endswith("}")
