"""The superstep runner: delivery, state, routing, limits, isolation, failures."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import pytest

from cantata.core import CancellationToken, ConfigurationError, WorkflowError
from cantata.runtime import AgentActivated, AgentId, LocalRuntime
from cantata.workflows import (
    Case,
    Default,
    Executor,
    ExecutorFailedEvent,
    StatusEvent,
    SuperstepStartedEvent,
    WarningEvent,
    WorkflowBuilder,
    WorkflowContext,
    WorkflowEvent,
    WorkflowFailedEvent,
    executor,
    handler,
)


@dataclass
class Tagged(WorkflowEvent):
    text: str


class Adder(Executor):
    """Adds its step to the number and passes it on; records where it came from."""

    def __init__(self, id: str, step: int) -> None:
        super().__init__(id)
        self.step = step

    @handler
    async def add(self, value: int, ctx: WorkflowContext[int]) -> None:
        await ctx.send_message(value + self.step)


@executor
async def collect(value: int, ctx: WorkflowContext[None, int]) -> None:
    await ctx.yield_output(value)


@executor
def double(value: int) -> int:
    return value * 2


async def test_chain_delivers_one_superstep_per_hop() -> None:
    a, b = Adder("a", 1), Adder("b", 10)
    wf = WorkflowBuilder(a).add_chain([a, b, double, collect]).build()
    result = await wf.run(1, include_events=True)
    assert result.outputs == [24]
    assert result.status == "idle"
    steps = [e for e in result.events if isinstance(e, SuperstepStartedEvent)]
    assert [s.executor_ids for s in steps] == [["a"], ["b"], ["double"], ["collect"]]


async def test_state_is_committed_at_the_boundary() -> None:
    seen: dict[str, object] = {}

    @executor
    async def writer(value: int, ctx: WorkflowContext[int]) -> None:
        ctx.set_state("k", value)
        seen["own"] = ctx.get_state("k")
        await ctx.send_message(value)

    @executor
    async def reader(value: int, ctx: WorkflowContext[int]) -> None:
        seen["same_step"] = ctx.get_state("k", "unset")
        await ctx.send_message(value)

    @executor
    async def later(value: int, ctx: WorkflowContext[None, object]) -> None:
        await ctx.yield_output(ctx.get_state("k"))

    start = Adder("start", 0)
    wf = (
        WorkflowBuilder(start)
        .add_fan_out_edges(start, [writer, reader])
        .add_edge(writer, later)
        .build()
    )
    result = await wf.run(7)
    assert seen == {"own": 7, "same_step": "unset"}
    assert result.outputs == [7]


async def test_executors_of_a_superstep_run_concurrently() -> None:
    both_started = asyncio.Event()
    started: list[str] = []

    class Waiter(Executor):
        @handler
        async def take(self, value: int, ctx: WorkflowContext[None, str]) -> None:
            started.append(self.id)
            if len(started) == 2:
                both_started.set()
            await both_started.wait()  # deadlocks unless the other runs meanwhile
            await ctx.yield_output(self.id)

    start = Adder("start", 0)
    wf = WorkflowBuilder(start).add_fan_out_edges(start, [Waiter("x"), Waiter("y")]).build()
    result = await asyncio.wait_for(wf.run(1), 10)
    assert sorted(result.outputs) == ["x", "y"]


async def test_a_cycle_that_does_not_converge_fails_clearly() -> None:
    a, b = Adder("a", 1), Adder("b", 1)
    wf = WorkflowBuilder(a, max_supersteps=5).add_edge(a, b).add_edge(b, a).build()
    with pytest.raises(WorkflowError, match="did not converge within 5 supersteps"):
        await wf.run(0)


async def test_a_cycle_with_an_exit_condition_ends() -> None:
    a = Adder("a", 1)
    wf = (
        WorkflowBuilder(a)
        .add_edge(a, a, condition=lambda v: v < 5)
        .add_edge(a, collect, condition=lambda v: v >= 5)
        .build()
    )
    assert (await wf.run(0)).outputs == [5]


async def test_fan_out_to_a_selection_and_fan_in_as_a_list() -> None:
    start = Adder("start", 0)
    workers = [Adder(f"w{i}", i) for i in range(4)]

    @executor
    async def total(values: list[int], ctx: WorkflowContext[None, list[int]]) -> None:
        await ctx.yield_output(values)

    wf = (
        WorkflowBuilder(start)
        .add_fan_out_edges(start, workers)
        .add_fan_in_edges(workers, total)
        .build()
    )
    assert (await wf.run(10)).outputs == [[10, 11, 12, 13]]

    def evens(value: int, ids: list[str]) -> list[str]:
        return [i for i in ids if int(i[1:]) % 2 == 0]

    start2 = Adder("start", 0)
    wf2 = WorkflowBuilder(start2).add_fan_out_edges(start2, workers, selection=evens)
    for w in workers:
        wf2.add_edge(w, collect)
    assert sorted((await wf2.build().run(10)).outputs) == [10, 12]


async def test_fan_in_waits_for_every_source() -> None:
    start = Adder("start", 0)
    fast, slow1 = Adder("fast", 1), Adder("slow1", 1)
    slow2 = Adder("slow2", 1)

    @executor
    async def join(values: list[int], ctx: WorkflowContext[None, list[int]]) -> None:
        await ctx.yield_output(values)

    wf = (
        WorkflowBuilder(start)
        .add_fan_out_edges(start, [fast, slow1])
        .add_edge(slow1, slow2)
        .add_fan_in_edges([fast, slow2], join)
        .build()
    )
    assert (await wf.run(0)).outputs == [[1, 2]]


async def test_switch_case_takes_the_first_match_else_the_default() -> None:
    @executor
    async def big(value: int, ctx: WorkflowContext[None, str]) -> None:
        await ctx.yield_output(f"big {value}")

    @executor
    async def small(value: int, ctx: WorkflowContext[None, str]) -> None:
        await ctx.yield_output(f"small {value}")

    @executor
    async def other(value: int, ctx: WorkflowContext[None, str]) -> None:
        await ctx.yield_output(f"other {value}")

    start = Adder("start", 0)
    wf = (
        WorkflowBuilder(start)
        .add_switch_case_edges(
            start, [Case(lambda v: v > 100, big), Case(lambda v: v > 10, small), Default(other)]
        )
        .build()
    )
    assert (await wf.run(500)).outputs == ["big 500"]
    assert (await wf.run(50)).outputs == ["small 50"]
    assert (await wf.run(5)).outputs == ["other 5"]


async def test_send_to_one_target_and_learn_the_senders() -> None:
    @executor
    async def router(value: int, ctx: WorkflowContext[int]) -> None:
        await ctx.send_message(value, target_id="right")

    @executor
    async def left(value: int, ctx: WorkflowContext[None, str]) -> None:
        await ctx.yield_output("left")

    @executor
    async def right(value: int, ctx: WorkflowContext[None, list[str]]) -> None:
        await ctx.yield_output(ctx.source_executor_ids)

    wf = WorkflowBuilder(router).add_fan_out_edges(router, [left, right]).build()
    assert (await wf.run(1)).outputs == [["router"]]


async def test_sending_to_a_target_without_an_edge_fails() -> None:
    @executor
    async def lost(value: int, ctx: WorkflowContext[int]) -> None:
        await ctx.send_message(value, target_id="nowhere")

    wf = WorkflowBuilder(lost).add_edge(lost, collect).build()
    with pytest.raises(WorkflowError, match="'nowhere', which no edge"):
        await wf.run(1)


async def test_messages_no_target_takes_raise_a_warning() -> None:
    @executor
    async def mixed(value: int, ctx: WorkflowContext[int | str]) -> None:
        await ctx.send_message("not an int")
        await ctx.send_message(value)

    wf = WorkflowBuilder(mixed).add_edge(mixed, collect).build()
    result = await wf.run(3, include_events=True)
    assert result.outputs == [3]
    warnings = [e for e in result.events if isinstance(e, WarningEvent)]
    assert len(warnings) == 1 and "str sent by 'mixed'" in warnings[0].message


async def test_custom_events_and_kwargs_targeted_by_executor_id() -> None:
    @executor
    async def first(value: int, ctx: WorkflowContext[int]) -> None:
        await ctx.add_event(Tagged(f"first {dict(ctx.kwargs)}"))
        await ctx.send_message(value)

    @executor
    async def second(value: int, ctx: WorkflowContext[None, dict[str, object]]) -> None:
        await ctx.yield_output(dict(ctx.kwargs))

    wf = WorkflowBuilder(first).add_edge(first, second).build()
    result = await wf.run(
        1,
        kwargs={"tenant": "t1"},
        executor_kwargs={"second": {"temp": 0.2}},
        include_events=True,
    )
    assert result.outputs == [{"tenant": "t1", "temp": 0.2}]
    assert [e.text for e in result.events if isinstance(e, Tagged)] == ["first {'tenant': 't1'}"]
    with pytest.raises(ConfigurationError, match="'ghost'"):
        await wf.run(1, executor_kwargs={"ghost": {}})


async def test_non_event_is_refused() -> None:
    @executor
    async def bad(value: int, ctx: WorkflowContext) -> None:
        await ctx.add_event("hello")  # type: ignore[arg-type]

    with pytest.raises(WorkflowError, match="must subclass"):
        await WorkflowBuilder(bad).build().run(1)


async def test_input_the_start_executor_cannot_take_is_refused() -> None:
    wf = WorkflowBuilder(double).add_edge(double, collect).build()
    with pytest.raises(WorkflowError, match="cannot take a str"):
        await wf.run("text")


async def test_failure_emits_events_and_raises_naming_the_executor() -> None:
    @executor
    async def broken(value: int, ctx: WorkflowContext[int]) -> None:
        raise ValueError("boom")

    wf = WorkflowBuilder(double).add_edge(double, broken).build()
    stream = wf.run_stream(1)
    events: list[WorkflowEvent] = []
    with pytest.raises(WorkflowError, match="executor 'broken' failed: ValueError: boom"):
        async for event in stream:
            events.append(event)
    assert any(isinstance(e, ExecutorFailedEvent) and e.executor_id == "broken" for e in events)
    failed = [e for e in events if isinstance(e, WorkflowFailedEvent)]
    assert failed and failed[0].executor_id == "broken"
    assert isinstance(events[-1], StatusEvent) and events[-1].status == "failed"
    with pytest.raises(WorkflowError, match="the run failed, so it has no result"):
        _ = stream.result


async def test_cancellation_ends_the_run_cancelled() -> None:
    token = CancellationToken()
    entered = asyncio.Event()

    @executor
    async def slow(value: int, ctx: WorkflowContext[int]) -> None:
        entered.set()
        await asyncio.Event().wait()  # until cancelled

    wf = WorkflowBuilder(slow).add_edge(slow, collect).build()
    task = asyncio.ensure_future(wf.run(1, cancellation_token=token))
    await entered.wait()
    token.cancel()
    result = await task
    assert result.status == "cancelled"


async def test_hundred_concurrent_runs_are_isolated() -> None:
    @executor
    async def remember(value: int, ctx: WorkflowContext[int]) -> None:
        ctx.set_state("mine", value)
        log = ctx.log("seen")
        log.append(value)
        await asyncio.sleep(0)  # let other runs interleave
        await ctx.send_message(value)

    @executor
    async def check(value: int, ctx: WorkflowContext[None, tuple[int, object, int]]) -> None:
        await ctx.yield_output((value, ctx.get_state("mine"), ctx.run_id.__len__()))

    wf = WorkflowBuilder(remember).add_edge(remember, check).build()
    results = await asyncio.gather(*[wf.run(i) for i in range(100)])
    assert [r.outputs for r in results] == [[(i, i, 32)] for i in range(100)]
    assert len({r.run_id for r in results}) == 100


@pytest.mark.parametrize("placement", ["run", "executor"])
async def test_both_placements_on_a_shared_runtime(placement: str) -> None:
    a = Adder("a", 1)
    wf = WorkflowBuilder(a, placement=placement).add_chain([a, double, collect]).build()  # type: ignore[arg-type]
    async with LocalRuntime() as runtime:
        activated: list[AgentId] = []
        runtime.add_listener(
            lambda e: activated.append(e.agent_id) if type(e) is AgentActivated else None
        )
        results = await asyncio.gather(*[wf.run(i, runtime=runtime) for i in range(10)])
        assert [r.outputs for r in results] == [[(i + 1) * 2] for i in range(10)]
        types = {agent.type for agent in activated}
        expected = 1 if placement == "run" else 3
        assert len(types) == expected
        assert len(set(activated)) == 10 * expected
        assert runtime.live_agents() == []  # each run's actors left as its call returned


async def test_result_lists_status_events_in_order() -> None:
    wf = WorkflowBuilder(double).add_edge(double, collect).build()
    result = await wf.run(2, include_events=True)
    statuses = [e.status for e in result.events if isinstance(e, StatusEvent)]
    assert statuses == ["in_progress", "idle"]


async def test_executor_placement_streams_live_and_answers_requests_on_a_shared_runtime() -> None:
    from cantata.core import register
    from cantata.workflows import response_handler

    @register(name="tests.workflows.runner.Confirm")
    @dataclass
    class Confirm:
        value: int

    class Asker(Executor):
        @handler
        async def ask(self, value: int, ctx: WorkflowContext) -> None:
            await ctx.add_event(Tagged("asking"))
            await ctx.request_info(Confirm(value))

        @response_handler
        async def got(self, request: Confirm, ok: bool, ctx: WorkflowContext[int]) -> None:
            await ctx.send_message(request.value if ok else -1)

    asker = Asker("asker")
    wf = WorkflowBuilder(asker, placement="executor").add_edge(asker, collect).build()
    async with LocalRuntime() as runtime:
        stream = wf.run_stream(9, runtime=runtime)
        tags = [e.text async for e in stream if isinstance(e, Tagged)]
        assert tags == ["asking"]
        first = stream.result
        [request] = first.pending_requests
        done = await first.send_responses({request.request_id: True})
        assert done.outputs == [9]


async def test_synchronous_handlers_send_and_yield_without_await() -> None:
    @executor
    def split(text: str, ctx: WorkflowContext[str, str]) -> None:
        ctx.yield_output(f"got {text}")
        for word in text.split():
            ctx.send_message(word)

    @executor
    def upper(word: str) -> str:
        return word.upper()

    @executor
    async def show(word: str, ctx: WorkflowContext[None, str]) -> None:
        await ctx.yield_output(word)

    wf = WorkflowBuilder(split).add_edge(split, upper).add_edge(upper, show).build()
    assert (await wf.run("a b")).outputs == ["got a b", "A", "B"]


async def test_a_cancelled_run_keeps_its_messages_and_can_be_continued() -> None:
    token = CancellationToken()
    entered = asyncio.Event()
    hold = {"wait": True}

    @executor
    async def slow(value: int, ctx: WorkflowContext[int]) -> None:
        if hold["wait"]:
            entered.set()
            await asyncio.Event().wait()  # until cancelled
        await ctx.send_message(value * 10)

    wf = WorkflowBuilder(slow).add_edge(slow, collect).build()
    task = asyncio.ensure_future(wf.run(4, cancellation_token=token))
    await entered.wait()
    token.cancel()
    result = await task
    assert result.status == "cancelled"
    hold["wait"] = False
    done = await result.run.continue_run()
    assert done.status == "idle" and done.outputs == [40]


@pytest.mark.parametrize("placement", ["run", "executor"])
@pytest.mark.parametrize("sync_failure", [True, False])
async def test_a_failure_cancels_the_executors_still_running_in_its_superstep(
    placement: str, sync_failure: bool
) -> None:
    cancelled = asyncio.Event()

    @executor
    def start(value: int) -> int:
        return value

    if sync_failure:

        @executor(id="boom")
        def boom_sync(value: int) -> None:
            raise ValueError("boom")

        boom: Any = boom_sync
    else:

        @executor(id="boom")
        async def boom_async(value: int) -> None:
            raise ValueError("boom")

        boom = boom_async

    started = asyncio.Event()

    @executor
    async def hang(value: int) -> None:
        started.set()
        try:
            await asyncio.Event().wait()  # would never end
        except asyncio.CancelledError:
            cancelled.set()
            raise

    wf = (
        WorkflowBuilder(start, placement=placement)  # type: ignore[arg-type]
        .add_fan_out_edges(start, [hang, boom])
        .build()
    )
    async with asyncio.timeout(20):  # a guard against the hang this test is about
        with pytest.raises(WorkflowError, match="executor 'boom' failed: ValueError: boom"):
            await wf.run(1)
    assert cancelled.is_set() or not started.is_set()  # cancelled, or never started
    assert asyncio.all_tasks() == {asyncio.current_task()}  # nothing left running


async def test_a_failing_edge_condition_names_the_edge_and_commits_nothing() -> None:
    broken = {"once": True}

    def small(value: int) -> bool:
        if broken.pop("once", False):
            raise KeyError("lookup")
        return value < 100

    @executor
    async def step(value: int, ctx: WorkflowContext[int]) -> None:
        ctx.set_state("seen", value)
        await ctx.send_message(value + 1)

    wf = WorkflowBuilder(step).add_edge(step, collect, condition=small).build()
    run = wf._new_run(
        1, runtime=None, checkpoint_store=None, kwargs=None, executor_kwargs=None, run_id=None
    )
    with pytest.raises(
        WorkflowError, match=r"the condition of edge 'step' -> 'collect' raised KeyError"
    ):
        await run.continue_run()
    assert run._state.state == {} and run._state.superstep == 0  # nothing was committed
    done = await run.continue_run()
    assert done.outputs == [2] and run._state.state == {"seen": 1}


async def test_changing_a_read_value_in_place_is_not_seen_before_the_boundary() -> None:
    seen: list[object] = []
    fail = {"once": True}

    @executor
    async def setup(value: int, ctx: WorkflowContext[int]) -> None:
        ctx.set_state("items", [0])
        await ctx.send_message(value)

    @executor
    async def appender(value: int, ctx: WorkflowContext[int]) -> None:
        items = ctx.get_state("items")
        items.append(value)  # the usual read-change-write
        ctx.set_state("items", items)
        if fail.pop("once", False):
            raise RuntimeError("after changing the list")

    @executor
    async def reader(value: int, ctx: WorkflowContext[int]) -> None:
        seen.append(list(ctx.get_state("items")))

    wf = WorkflowBuilder(setup).add_fan_out_edges(setup, [appender, reader]).build()
    run = wf._new_run(
        5, runtime=None, checkpoint_store=None, kwargs=None, executor_kwargs=None, run_id=None
    )
    with pytest.raises(WorkflowError, match="after changing the list"):
        await run.continue_run()
    assert run._state.state["items"] == [0]  # the failed superstep changed nothing
    await run.continue_run()
    # never the appender's uncommitted change (in the failed superstep the reader may not
    # have started at all: a failure starts nothing more)
    assert seen and all(s == [0] for s in seen)
    assert run._state.state["items"] == [0, 5]


async def test_executor_state_changed_in_place_but_never_set_is_not_kept() -> None:
    @executor
    async def count(value: int, ctx: WorkflowContext[int, int]) -> None:
        if value == 0:
            ctx.set_executor_state({"n": 0})
        else:
            state = ctx.get_executor_state()
            state["n"] += 1  # not set: a checkpoint would not hold it, so neither does the run
            await ctx.yield_output(state["n"])
        if value < 2:
            await ctx.send_message(value + 1)

    wf = WorkflowBuilder(count).add_edge(count, count).build()
    assert (await wf.run(0)).outputs == [1, 1]


async def test_a_runtime_default_timeout_bounds_each_executor_not_the_whole_run() -> None:
    import asyncio

    from cantata.runtime import LocalRuntime

    @executor
    async def slow(n: int, ctx: WorkflowContext[int, int]) -> None:
        await asyncio.sleep(0.02)
        if n < 5:
            await ctx.send_message(n + 1)
        else:
            await ctx.yield_output(n)

    @executor
    async def stuck(n: int, ctx: WorkflowContext[None, int]) -> None:
        await asyncio.Event().wait()

    async with LocalRuntime(default_timeout=0.05) as runtime:
        # placement "run": one message for the whole call, longer than the default
        whole = WorkflowBuilder(slow).add_edge(slow, slow).build()
        assert (await whole.run(0, runtime=runtime)).outputs == [5]
        # placement "executor": each executor's message is bounded by the default
        placed = WorkflowBuilder(stuck, placement="executor").build()
        async with asyncio.timeout(20):  # a guard, not a measure
            with pytest.raises(WorkflowError, match="stuck"):
                await placed.run(1, runtime=runtime)
