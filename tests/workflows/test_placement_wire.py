"""`placement="executor"` on a runtime that copies every message through the JSON registry.

`LocalRuntime(serialize_messages=True)` passes each message and result through `dumps` and
`loads`, as a runtime across processes must: a workflow that runs there sends its executors
values only (no sink, no token, no runner). Each test runs a workflow both in process and
there and compares what comes out, events included and in order.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import pytest

from cantata.agents import ChatAgent
from cantata.core import (
    CancellationToken,
    ConfigurationError,
    UnknownTypeError,
    WorkflowError,
    register,
)
from cantata.models import ScriptedChatClient
from cantata.runtime import (
    DROP,
    AgentActivated,
    AgentId,
    InterventionHandler,
    LocalRuntime,
    MessageContext,
)
from cantata.workflows import (
    AgentExecutor,
    AgentExecutorResponse,
    AgentUpdateEvent,
    Case,
    Default,
    Executor,
    ExecutorFailedEvent,
    InMemoryCheckpointStore,
    SuperstepCompletedEvent,
    Workflow,
    WorkflowBuilder,
    WorkflowContext,
    WorkflowEvent,
    WorkflowRunResult,
    executor,
    handler,
    response_handler,
)
from cantata.workflows.actor import ExecutorTask, PublishedEvent


@register(name="tests.workflows.wire.Tagged")
@dataclass(slots=True)
class Tagged(WorkflowEvent):
    text: str


@register(name="tests.workflows.wire.Item")
@dataclass
class Item:
    index: int
    value: int


@register(name="tests.workflows.wire.Approve")
@dataclass
class Approve:
    amount: int


class Recorder(InterventionHandler):
    """Records the type of every message sent, published and answered."""

    def __init__(self) -> None:
        self.sent: list[type] = []
        self.published: list[type] = []
        self.answered: list[type] = []

    async def on_send(self, message: Any, ctx: MessageContext, recipient: AgentId) -> Any:
        self.sent.append(type(message))
        return message

    async def on_publish(self, message: Any, ctx: MessageContext) -> Any:
        self.published.append(type(message))
        return message

    async def on_response(self, message: Any, ctx: MessageContext, responder: AgentId) -> Any:
        self.answered.append(type(message))
        return message


@pytest.fixture
async def wire() -> AsyncIterator[LocalRuntime]:
    async with LocalRuntime(serialize_messages=True) as runtime:
        yield runtime


def shape(events: list[WorkflowEvent]) -> list[tuple[str, Any]]:
    """Events by kind and executor (errors and checkpoint ids differ between runs)."""
    return [(type(e).__name__, getattr(e, "executor_id", None)) for e in events]


async def both(build: Callable[[str], Workflow], given: Any, wire: LocalRuntime) -> Any:
    """Run in process (placement "run") and on the wire (placement "executor"); compare."""
    local = await build("run").run(given, include_events=True)
    remote = await build("executor").run(given, runtime=wire, include_events=True)
    assert remote.outputs == local.outputs
    assert remote.status == local.status
    assert shape(remote.events) == shape(local.events)
    return remote


class Step(Executor):
    """Adds its index; the last one yields the sum and how much its log has seen."""

    def __init__(self, index: int, last: bool) -> None:
        super().__init__(f"s{index}")
        self.index, self.last = index, last

    @handler
    async def take(self, value: int, ctx: WorkflowContext[int, int]) -> None:
        ctx.log("seen").append(value)
        if self.last:
            await ctx.yield_output(value + len(ctx.log("seen")))
        else:
            await ctx.send_message(value + self.index)


def chain(placement: str) -> Workflow:
    steps = [Step(i, i == 9) for i in range(10)]
    return WorkflowBuilder(steps[0], placement=placement).add_chain(steps).build()  # type: ignore[arg-type]


async def test_a_chain_sends_only_values(wire: LocalRuntime) -> None:
    recorder = Recorder()
    wire.add_intervention(recorder)
    result = await both(chain, 1, wire)
    assert result.outputs == [1 + sum(range(9)) + 1]
    assert set(recorder.sent) == {ExecutorTask}
    assert len(recorder.sent) == 10
    assert set(recorder.published) == {PublishedEvent}
    assert len(recorder.published) == 21  # invoked and completed per executor, the output
    assert {t.__name__ for t in recorder.answered} == {"StepResult"}


class Worker(Executor):
    def __init__(self, id: str, index: int) -> None:
        super().__init__(id)
        self.index = index

    @handler
    async def work(self, n: int, ctx: WorkflowContext[Item]) -> None:
        ctx.set_state(self.id, self.index * n)
        await ctx.send_message(Item(self.index, self.index * n))


def fan(placement: str) -> Workflow:
    @executor
    async def split(n: int, ctx: WorkflowContext[int]) -> None:
        await ctx.send_message(n)

    workers = [Worker(f"w{i}", i) for i in range(20)]

    @executor
    async def join(items: list[Item], ctx: WorkflowContext[None, int]) -> None:
        await ctx.yield_output(sum(item.value for item in items))

    @executor
    async def report(items: list[Item], ctx: WorkflowContext[None, list[int]]) -> None:
        await ctx.yield_output(sorted(item.index for item in items))

    return (
        WorkflowBuilder(split, placement=placement)  # type: ignore[arg-type]
        .add_fan_out_edges(split, workers)
        .add_fan_in_edges(workers, join)
        .add_fan_in_edges(workers, report)
        .build()
    )


async def test_a_fan_out_and_fan_in(wire: LocalRuntime) -> None:
    result = await both(fan, 3, wire)
    assert result.outputs == [3 * sum(range(20)), list(range(20))] or result.outputs == [
        list(range(20)),
        3 * sum(range(20)),
    ]


def switch(placement: str) -> Workflow:
    @executor
    def start(value: int) -> int:
        return value

    def sink(name: str) -> Executor:
        @executor(id=name)
        async def take(value: int, ctx: WorkflowContext[None, str]) -> None:
            await ctx.yield_output(f"{name} {value}")

        return take

    big, small, other = sink("big"), sink("small"), sink("other")
    return (
        WorkflowBuilder(start, placement=placement)  # type: ignore[arg-type]
        .add_switch_case_edges(
            start, [Case(lambda v: v > 100, big), Case(lambda v: v > 10, small), Default(other)]
        )
        .build()
    )


@pytest.mark.parametrize("value", [500, 50, 5])
async def test_switch_case(wire: LocalRuntime, value: int) -> None:
    await both(switch, value, wire)


class Gate(Executor):
    @handler
    async def ask(self, amount: int, ctx: WorkflowContext[int]) -> None:
        ctx.set_executor_state(amount)
        await ctx.request_info(Approve(amount))

    @response_handler
    async def answered(self, request: Approve, ok: bool, ctx: WorkflowContext[int]) -> None:
        if ok:
            await ctx.send_message(ctx.get_executor_state() + request.amount)


def gate(placement: str) -> Workflow:
    @executor
    async def pay(amount: int, ctx: WorkflowContext[None, str]) -> None:
        await ctx.yield_output(f"paid {amount}")

    g = Gate("gate")
    return WorkflowBuilder(g, placement=placement).add_edge(g, pay).build()  # type: ignore[arg-type]


async def answer(result: WorkflowRunResult, value: Any) -> WorkflowRunResult:
    [request] = result.pending_requests
    return await result.run.send_responses({request.request_id: value}, include_events=True)


async def test_a_request_and_its_answer(wire: LocalRuntime) -> None:
    local = await gate("run").run(7)
    remote = await gate("executor").run(7, runtime=wire)
    assert remote.status == local.status == "idle_with_pending_requests"
    [asked] = remote.pending_requests
    assert asked.data == Approve(7) and asked.response_type is bool
    with pytest.raises(WorkflowError, match="must be a bool"):
        await remote.run.send_responses({asked.request_id: "yes"})
    done_local = await answer(local, True)
    done_remote = await answer(remote, True)
    assert done_remote.outputs == done_local.outputs == ["paid 14"]
    assert shape(done_remote.events) == shape(done_local.events)


async def test_checkpoints_and_a_resume(wire: LocalRuntime) -> None:
    store_local, store_remote = InMemoryCheckpointStore(), InMemoryCheckpointStore()
    local = await fan("run").run(2, checkpoint_store=store_local)
    remote = await fan("executor").run(
        2, runtime=wire, checkpoint_store=store_remote, include_events=True
    )
    assert remote.outputs == local.outputs
    [first, *_] = [e.checkpoint_id for e in remote.events if isinstance(e, SuperstepCompletedEvent)]
    assert first is not None
    resumed = await fan("executor").resume(first, checkpoint_store=store_remote, runtime=wire)
    assert resumed.outputs == local.outputs


async def test_events_arrive_live_while_the_handler_runs(wire: LocalRuntime) -> None:
    seen = asyncio.Event()

    @executor
    async def talker(value: int, ctx: WorkflowContext[None, int]) -> None:
        await ctx.add_event(Tagged("before"))
        await seen.wait()  # only the consumer of the stream sets it
        await ctx.yield_output(value)

    wf = WorkflowBuilder(talker, placement="executor").build()
    stream = wf.run_stream(5, runtime=wire)
    kinds = []
    async with asyncio.timeout(20):  # a guard against the hang this test is about
        async for event in stream:
            kinds.append(type(event).__name__)
            if isinstance(event, Tagged):
                assert event.text == "before"
                seen.set()
    assert stream.result.outputs == [5]
    assert (
        kinds.index("Tagged") < kinds.index("OutputEvent") < kinds.index("ExecutorCompletedEvent")
    )


async def test_cancellation_reaches_the_executor_through_the_runtime(wire: LocalRuntime) -> None:
    entered = asyncio.Event()
    hold = {"wait": True}
    tokens: list[bool] = []

    @executor
    async def slow(value: int, ctx: WorkflowContext[None, int]) -> None:
        if hold["wait"]:
            entered.set()
            try:
                await asyncio.Event().wait()  # until cancelled
            finally:
                tokens.append(ctx.cancellation_token.is_cancelled)
        await ctx.yield_output(value * 10)

    wf = WorkflowBuilder(slow, placement="executor").build()
    token = CancellationToken()
    task = asyncio.ensure_future(wf.run(4, runtime=wire, cancellation_token=token))
    await entered.wait()
    token.cancel()
    result = await task
    assert result.status == "cancelled"
    assert tokens == [True]  # the delivery's token, cancelled by the runtime
    hold["wait"] = False
    done = await result.run.continue_run()
    assert done.status == "idle" and done.outputs == [40]


async def test_a_failure_is_reported_after_the_events_before_it(wire: LocalRuntime) -> None:
    @executor
    async def boom(value: int, ctx: WorkflowContext[None, int]) -> None:
        await ctx.add_event(Tagged("first"))
        raise ValueError("boom")

    wf = WorkflowBuilder(boom, placement="executor").build()
    events: list[WorkflowEvent] = []
    stream = wf.run_stream(1, runtime=wire)
    with pytest.raises(WorkflowError, match="executor 'boom' failed: ValueError: boom"):
        async for event in stream:
            events.append(event)
    kinds = [type(e).__name__ for e in events]
    assert kinds.index("Tagged") < kinds.index("ExecutorFailedEvent")
    assert kinds.index("ExecutorFailedEvent") < kinds.index("WorkflowFailedEvent")
    [failed] = [e for e in events if isinstance(e, ExecutorFailedEvent)]
    assert isinstance(failed.error, ValueError)


async def test_an_unregistered_message_type_fails_clearly(wire: LocalRuntime) -> None:
    @dataclass
    class Loose:
        value: int

    @executor
    async def first(value: int, ctx: WorkflowContext[Loose]) -> None:
        await ctx.send_message(Loose(value))

    @executor
    async def second(loose: Loose, ctx: WorkflowContext[None, int]) -> None:
        await ctx.yield_output(loose.value)

    wf = WorkflowBuilder(first, placement="executor").add_edge(first, second).build()
    assert (await wf.run(3)).outputs == [3]  # in process, nothing is copied
    with pytest.raises((WorkflowError, UnknownTypeError), match="Loose"):
        await wf.run(3, runtime=wire)


def agents(placement: str) -> Workflow:
    def agent(name: str) -> ChatAgent:
        client = ScriptedChatClient(lambda msgs, opts: f"{name} saw {len(msgs)}", chunk_size=3)
        return ChatAgent(client, name=name)

    writer = AgentExecutor(agent("writer"), id="writer")
    editor = AgentExecutor(agent("editor"), id="editor")

    @executor
    async def out(response: AgentExecutorResponse, ctx: WorkflowContext[None, str]) -> None:
        await ctx.yield_output(" | ".join(m.text for m in response.full_conversation))

    return (
        WorkflowBuilder(writer, placement=placement)  # type: ignore[arg-type]
        .add_chain([writer, editor, out])
        .build()
    )


async def test_agent_executors_stream_their_updates(wire: LocalRuntime) -> None:
    local = await agents("run").run_stream("draft").get_result()
    remote = await agents("executor").run_stream("draft", runtime=wire).get_result()
    assert remote.outputs == local.outputs
    assert remote.outputs and "editor saw" in remote.outputs[0]
    updates = [e for e in remote.events if isinstance(e, AgentUpdateEvent)]
    assert len(updates) == len([e for e in local.events if isinstance(e, AgentUpdateEvent)]) > 2
    assert shape(remote.events) == shape(local.events)


async def test_the_run_placement_is_refused_clearly_on_a_copying_runtime(
    wire: LocalRuntime,
) -> None:
    with pytest.raises(WorkflowError, match="placement='executor'"):
        await chain("run").run(1, runtime=wire)


class LateEvents(LocalRuntime):
    """Delivers what a handler publishes only after its direct request has returned, and in
    reverse order: as a runtime across processes may, where events and results travel
    separately. (Scheduling order only, no time: the release is a task started when the
    request returns, so it runs before whoever awaits the request's caller.)"""

    def __init__(self) -> None:
        super().__init__(serialize_messages=True)
        self.held: list[tuple[Any, Any]] = []
        self.releases: set[asyncio.Task[None]] = set()

    async def publish_message(self, message: Any, topic_id: Any, **kw: Any) -> None:
        self.held.append((message, topic_id))

    async def send_message(self, message: Any, recipient: AgentId, **kw: Any) -> Any:
        try:
            return await super().send_message(message, recipient, **kw)
        finally:
            held, self.held = self.held, []
            task = asyncio.get_running_loop().create_task(self._deliver_held(held))
            self.releases.add(task)
            task.add_done_callback(self.releases.discard)

    async def _deliver_held(self, held: list[tuple[Any, Any]]) -> None:
        for message, topic_id in reversed(held):
            await super().publish_message(message, topic_id)


@pytest.mark.parametrize("build", [chain, agents, switch])
async def test_events_published_late_and_out_of_order_keep_their_place(
    build: Callable[[str], Workflow],
) -> None:
    given = 50 if build is switch else 1 if build is chain else "draft"
    local = await build("run").run_stream(given).get_result()
    async with LateEvents() as late:
        remote = await build("executor").run_stream(given, runtime=late).get_result()
    assert remote.outputs == local.outputs
    assert shape(remote.events) == shape(local.events)


class DropEvents(InterventionHandler):
    """Drops every published event of the run: a runtime that loses them on the way."""

    async def on_publish(self, message: Any, ctx: MessageContext) -> Any:
        return DROP if isinstance(message, PublishedEvent) else message


async def test_lost_events_end_the_wait_with_an_error_naming_run_and_executor() -> None:
    steps = [Step(i, i == 2) for i in range(3)]
    wf = WorkflowBuilder(steps[0], placement="executor", event_timeout=0.2).add_chain(steps).build()
    async with LocalRuntime(serialize_messages=True, interventions=[DropEvents()]) as runtime:
        async with asyncio.timeout(20):  # before the fix: a wait nothing ever ends
            with pytest.raises(WorkflowError, match=r"only 0 arrived within 0\.2s") as caught:
                await wf.run(1, runtime=runtime, run_id="lost-run", include_events=True)
        text = str(caught.value)
        assert "'lost-run'" in text and "'s0'" in text
        # a run nobody watches publishes no events, so it has nothing to lose
        assert (await wf.run(1, runtime=runtime)).outputs == [1 + 0 + 1 + 1]


def test_event_timeout_must_be_positive() -> None:
    with pytest.raises(ConfigurationError, match="event_timeout"):
        WorkflowBuilder(Step(0, True), event_timeout=0)


async def test_each_run_has_its_own_executor_actors_keyed_by_its_run_id(
    wire: LocalRuntime,
) -> None:
    wf = chain("executor")
    activated: list[AgentId] = []
    wire.add_listener(lambda e: activated.append(e.agent_id) if type(e) is AgentActivated else None)
    for given in range(3):
        assert (await wf.run(given, runtime=wire)).outputs == [given + sum(range(9)) + 1]
    by_key: dict[str, int] = {}
    for agent in activated:
        by_key[agent.key] = by_key.get(agent.key, 0) + 1
    # on Ray an actor is an agent on the pool's hosts, not a process: a key per run is cheap
    assert sorted(by_key.values()) == [10, 10, 10]  # one per executor
    assert wire.live_agents() == []  # released as each run returned; no subscriber left


async def test_runs_at_the_same_time_get_their_own_actors(wire: LocalRuntime) -> None:
    release = asyncio.Event()

    @executor
    async def held(value: int, ctx: WorkflowContext[None, int]) -> None:
        await release.wait()
        await ctx.yield_output(value)

    wf = WorkflowBuilder(held, placement="executor").build()
    runs = [asyncio.ensure_future(wf.run(i, runtime=wire)) for i in range(3)]
    async with asyncio.timeout(20):
        while len(wire.live_agents()) < 3 + 3:  # noqa: ASYNC110 (three runs, three subscribers)
            await asyncio.sleep(0.01)
    assert len({a.key for a in wire.live_agents() if a.type != "cantata.local"}) == 3
    release.set()
    assert [(await r).outputs for r in runs] == [[0], [1], [2]]
