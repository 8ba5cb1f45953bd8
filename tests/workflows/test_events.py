"""Events: only the runner emits lifecycle events; invoked/completed events say what was
taken, sent and yielded; a run keeps its events only when asked; DEBUG logs per superstep."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import pytest

from cantata.agents import ChatAgent
from cantata.core import WorkflowError
from cantata.models import ScriptedChatClient
from cantata.workflows import (
    ExecutorCompletedEvent,
    ExecutorInvokedEvent,
    InMemoryCheckpointStore,
    OutputEvent,
    StatusEvent,
    SuperstepCompletedEvent,
    WarningEvent,
    WorkflowBuilder,
    WorkflowContext,
    WorkflowEvent,
    executor,
)


@dataclass
class Basket:
    items: list[str] = field(default_factory=list)
    copies: list[int] = field(default_factory=lambda: [0])

    def __deepcopy__(self, memo: dict[int, Any]) -> Basket:
        self.copies[0] += 1
        return Basket(list(self.items), self.copies)


@dataclass
class Note(WorkflowEvent):
    text: str


@pytest.mark.parametrize(
    "event",
    [
        StatusEvent("idle"),
        SuperstepCompletedEvent(3),
        OutputEvent("x", "fake"),
        ExecutorCompletedEvent("x"),
    ],
)
async def test_a_handler_cannot_emit_a_lifecycle_event(event: WorkflowEvent) -> None:
    @executor
    def liar(n: int, ctx: WorkflowContext[None, int]) -> None:
        ctx.add_event(event)

    with pytest.raises(WorkflowError, match=f"{type(event).__name__}.*only the workflow runner"):
        await WorkflowBuilder(liar).build().run(1)


async def test_a_handler_may_emit_its_own_events() -> None:
    @executor
    def talker(n: int, ctx: WorkflowContext[None, int]) -> None:
        ctx.add_event(Note("hello"))

    result = await WorkflowBuilder(talker).build().run(1, include_events=True)
    assert [e.text for e in result.events if isinstance(e, Note)] == ["hello"]


async def test_invoked_carries_a_copy_of_the_input_and_completed_what_was_sent() -> None:
    @executor
    async def fill(basket: Basket, ctx: WorkflowContext[Basket, str]) -> None:
        basket.items.append("apple")  # changes its own message, not the event's copy
        await ctx.send_message(basket)
        await ctx.yield_output("filled")

    @executor
    def count(basket: Basket, ctx: WorkflowContext[None, int]) -> None:
        ctx.yield_output(len(basket.items))

    wf = WorkflowBuilder(fill).add_edge(fill, count).build()
    result = await wf.run(Basket(["pear"]), include_events=True)
    invoked = [e for e in result.events if isinstance(e, ExecutorInvokedEvent)]
    assert [(e.executor_id, e.message_type) for e in invoked] == [
        ("fill", "Basket"),
        ("count", "Basket"),
    ]
    assert invoked[0].data.items == ["pear"] and invoked[1].data.items == ["pear", "apple"]
    completed = [e for e in result.events if isinstance(e, ExecutorCompletedEvent)]
    assert [e.executor_id for e in completed] == ["fill", "count"]
    assert [b.items for b in completed[0].sent] == [["pear", "apple"]]
    assert completed[0].yielded == ["filled"]
    assert (completed[1].sent, completed[1].yielded) == ([], [2])


async def test_a_run_nobody_watches_makes_no_events_nor_copies() -> None:
    @executor
    async def loop(basket: Basket, ctx: WorkflowContext[Basket, int]) -> None:
        if len(basket.items) < 100:
            basket.items.append("x")
            await ctx.send_message(basket)
        else:
            await ctx.yield_output(len(basket.items))

    wf = WorkflowBuilder(loop, max_supersteps=200).add_edge(loop, loop).build()
    basket = Basket()
    result = await wf.run(basket)
    assert result.outputs == [100] and result.status == "idle"
    assert basket.copies == [0]
    with pytest.raises(WorkflowError, match="include_events=True"):
        _ = result.events
    watched = await wf.run(Basket(), include_events=True)
    assert watched.outputs == [100] and len(watched.events) > 400


async def test_supersteps_are_logged_at_debug(caplog: pytest.LogCaptureFixture) -> None:
    @executor
    def one(n: int, ctx: WorkflowContext[None, int]) -> None:
        ctx.yield_output(n)

    with caplog.at_level(logging.DEBUG, logger="cantata.workflows"):
        result = await WorkflowBuilder(one, name="logged").build().run(5)
    text = "\n".join(r.getMessage() for r in caplog.records if r.name == "cantata.workflows")
    assert f"run {result.run_id!r}: superstep 1 starts, executors ['one']" in text
    assert "superstep 1 committed" in text and "'logged'" in text and "idle" in text


async def test_an_undelivered_message_is_also_a_logged_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    @executor
    def src(n: int, ctx: WorkflowContext[Any]) -> None:
        ctx.send_message("text")

    @executor
    def ints(n: int) -> None:
        return None

    wf = WorkflowBuilder(src).add_edge(src, ints).build()
    with caplog.at_level(logging.WARNING, logger="cantata.workflows"):
        await wf.run(1)
    assert any("was not delivered" in r.getMessage() for r in caplog.records)
    result = await wf.run(1, include_events=True)
    assert any(isinstance(e, WarningEvent) for e in result.events)


async def test_the_entry_checkpoint_holds_the_input_and_a_run_resumes_from_it() -> None:
    calls: list[int] = []

    @executor
    def double(n: int, ctx: WorkflowContext[int]) -> None:
        calls.append(n)
        ctx.send_message(n * 2)

    @executor
    def out(n: int, ctx: WorkflowContext[None, int]) -> None:
        ctx.yield_output(n)

    store = InMemoryCheckpointStore()
    wf = WorkflowBuilder(double).add_edge(double, out).build()
    full = await wf.run(21, checkpoint_store=store)
    entry, *rest = await store.list_checkpoints(run_id=full.run_id)
    assert entry.superstep == 0 and entry.parent_id is None and entry.messages[0]["message"] == 21
    assert [c.parent_id for c in rest] == [entry.checkpoint_id, rest[0].checkpoint_id]
    resumed = await wf.resume(entry.checkpoint_id, checkpoint_store=store)
    assert resumed.outputs == full.outputs == [42] and calls == [21, 21]


async def test_a_run_that_fails_in_its_first_superstep_is_replayed_from_its_entry() -> None:
    failing = [True]

    @executor
    def flaky(n: int, ctx: WorkflowContext[None, int]) -> None:
        if failing[0]:
            raise RuntimeError("not yet")
        ctx.yield_output(n + 1)

    store = InMemoryCheckpointStore()
    wf = WorkflowBuilder(flaky).build()
    with pytest.raises(WorkflowError, match="not yet"):
        await wf.run(1, checkpoint_store=store)
    [entry] = await store.list_checkpoints()
    failing[0] = False
    assert (await wf.resume(entry.checkpoint_id, checkpoint_store=store)).outputs == [2]


async def test_a_terminal_agent_s_response_is_not_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    write = ChatAgent(ScriptedChatClient(["draft"]), name="writer")
    edit = ChatAgent(ScriptedChatClient(["final"]), name="editor")
    wf = WorkflowBuilder(write).add_edge(write, edit).build()
    with caplog.at_level(logging.DEBUG, logger="cantata.workflows"):
        result = await wf.run("go", include_events=True)
    assert [r.text for r in result.outputs] == ["final"]
    warned = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert warned == [] and not any(isinstance(e, WarningEvent) for e in result.events)
    assert any("no out-edges" in r.getMessage() for r in caplog.records)


async def test_a_message_sent_by_an_executor_without_out_edges_is_logged_at_debug(
    caplog: pytest.LogCaptureFixture,
) -> None:
    @executor
    def lone(n: int, ctx: WorkflowContext[int, int]) -> None:
        ctx.send_message(n)
        ctx.yield_output(n)

    with caplog.at_level(logging.DEBUG, logger="cantata.workflows"):
        result = await WorkflowBuilder(lone).build().run(3, include_events=True)
    assert result.outputs == [3]
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert not any(isinstance(e, WarningEvent) for e in result.events)
    assert any("'lone' has no out-edges" in r.getMessage() for r in caplog.records)
