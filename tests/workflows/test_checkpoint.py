"""Checkpoints: every store, resume from any checkpoint (also in a fresh process), lineage,
human input after a restart, damaged data, and a cost that does not grow with history."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import subprocess
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cantata.core import CheckpointError, UnknownTypeError
from cantata.stores import MemoryStore, PostgresStore, SQLiteStore, seal, unseal
from cantata.workflows import (
    FileCheckpointStore,
    InMemoryCheckpointStore,
    StateStoreCheckpointStore,
    WorkflowBuilder,
    WorkflowCheckpoint,
    WorkflowContext,
    executor,
)

HERE = Path(__file__).resolve().parent


def flows() -> ModuleType:
    """The shared workflow definitions, loaded once (their types register once)."""
    name = "cantata_test_workflow_flows"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, HERE / "_flows.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(params=["memory", "file", "sqlite", "postgres"])
async def store(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[StateStoreCheckpointStore]:
    kind = request.param
    if kind == "memory":
        made: StateStoreCheckpointStore = InMemoryCheckpointStore()
    elif kind == "file":
        made = FileCheckpointStore(tmp_path / "ckpt")
    elif kind == "sqlite":
        made = StateStoreCheckpointStore(SQLiteStore(tmp_path / "ckpt.db"))
    else:
        dsn = request.getfixturevalue("postgres_dsn")
        made = StateStoreCheckpointStore(PostgresStore(dsn, table_prefix="cantata_wftest_"))
    yield made
    await made.close()


async def test_resume_from_every_checkpoint_equals_the_uninterrupted_run(
    store: StateStoreCheckpointStore,
) -> None:
    f = flows()
    full = await f.build_pipeline().run("a b c", checkpoint_store=store)
    assert full.outputs[-1] == "round 3: A B C!! ['A', 'B', 'C']"
    checkpoints = await store.list_checkpoints(run_id=full.run_id)
    # an entry checkpoint holding the input, then one per superstep
    assert [c.superstep for c in checkpoints] == [0, 1, 2, 3, 4, 5, 6]
    assert checkpoints[0].messages[0]["message"] == "a b c"
    assert full.checkpoint_id == checkpoints[-1].checkpoint_id
    for ckpt in checkpoints:
        resumed = await f.build_pipeline().resume(ckpt.checkpoint_id, checkpoint_store=store)
        assert resumed.outputs == full.outputs, f"from superstep {ckpt.superstep}"
        assert resumed.status == "idle"


async def test_lineage_is_kept_across_resumes() -> None:
    f = flows()
    store = InMemoryCheckpointStore()
    full = await f.build_pipeline().run("a b c", checkpoint_store=store)
    first = await store.list_checkpoints(run_id=full.run_id)
    assert first[0].parent_id is None
    assert [c.parent_id for c in first[1:]] == [c.checkpoint_id for c in first[:-1]]
    resumed = await f.build_pipeline().resume(first[2].checkpoint_id, checkpoint_store=store)
    chain = [await store.load(resumed.checkpoint_id or "")]
    while chain[-1].parent_id is not None:
        chain.append(await store.load(chain[-1].parent_id))
    supersteps = [c.superstep for c in reversed(chain)]
    assert supersteps == [0, 1, 2, 3, 4, 5, 6]
    assert chain[-3].checkpoint_id == first[2].checkpoint_id  # the branch point
    assert chain[0].checkpoint_id not in {c.checkpoint_id for c in first}


def _run_script(*args: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, str(HERE / "_flows.py"), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


async def test_resume_in_a_fresh_process_from_sqlite(tmp_path: Path) -> None:
    f = flows()
    path = tmp_path / "runs.db"
    store = StateStoreCheckpointStore(SQLiteStore(path))
    full = await f.build_pipeline().run("x y z", checkpoint_store=store)
    middle = (await store.list_checkpoints(run_id=full.run_id))[3].checkpoint_id
    await store.close()
    result = await asyncio.to_thread(_run_script, str(path), middle)
    assert result == {"status": "idle", "outputs": full.outputs}


async def test_human_in_the_loop_after_a_restart_from_sqlite(tmp_path: Path) -> None:
    f = flows()
    path = tmp_path / "gate.db"
    store = StateStoreCheckpointStore(SQLiteStore(path))
    first = await f.build_gate().run(25, checkpoint_store=store)
    assert first.status == "idle_with_pending_requests"
    [request] = first.pending_requests
    checkpoint = first.checkpoint_id
    assert checkpoint is not None
    assert (await store.load(checkpoint)).pending_request_ids == [request.request_id]
    await store.close()
    # A fresh process: wrong answer type refused, then the right one continues the run.
    done = await asyncio.to_thread(
        subprocess.run,
        [
            sys.executable,
            str(HERE / "_flows.py"),
            str(path),
            checkpoint,
            json.dumps({request.request_id: "yes"}),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode != 0 and "must be a bool, not a str" in done.stderr
    result = await asyncio.to_thread(
        _run_script, str(path), checkpoint, json.dumps({request.request_id: True})
    )
    assert result == {"status": "idle", "outputs": ["paid 25"]}


async def test_restored_run_continues_with_send_responses() -> None:
    f = flows()
    store = InMemoryCheckpointStore()
    first = await f.build_gate().run(3, checkpoint_store=store)
    assert first.checkpoint_id is not None
    run = await f.build_gate().restore(first.checkpoint_id, checkpoint_store=store)
    assert run.status == "idle_with_pending_requests"
    [request] = run.pending_requests
    result = await run.send_responses({request.request_id: True})
    assert result.outputs == ["paid 3"]


class Unregistered:
    pass


async def test_a_checkpoint_of_an_unregistered_type_fails_with_the_registry_error() -> None:
    @executor
    async def send_odd(value: int, ctx: WorkflowContext[Unregistered]) -> None:
        await ctx.send_message(Unregistered())

    @executor
    async def sink(value: Unregistered, ctx: WorkflowContext) -> None:
        pass

    wf = WorkflowBuilder(send_odd).add_edge(send_odd, sink).build()
    with pytest.raises(UnknownTypeError, match=r"register it with cantata\.core\.register"):
        await wf.run(1, checkpoint_store=InMemoryCheckpointStore())


async def test_unknown_missing_and_foreign_checkpoints_are_refused() -> None:
    f = flows()
    store = InMemoryCheckpointStore()
    with pytest.raises(CheckpointError, match="no checkpoint 'nope'"):
        await f.build_pipeline().resume("nope", checkpoint_store=store)
    run = await f.build_pipeline().run("a b c", checkpoint_store=store)
    assert run.checkpoint_id is not None
    with pytest.raises(CheckpointError, match="cannot resume workflow 'gate'"):
        await f.build_gate().resume(run.checkpoint_id, checkpoint_store=store)
    record = unseal(await store.store.get(f"wf:ckpt:{run.checkpoint_id}"), where="test")
    await store.store.put(f"wf:ckpt:{run.checkpoint_id}", seal({**record, "schema_version": 99}))
    with pytest.raises(CheckpointError, match="schema_version 99"):
        await f.build_pipeline().resume(run.checkpoint_id, checkpoint_store=store)


def _damage(record: Any, path: Sequence[Any], value: Any) -> Any:
    """A copy of a JSON record with the value at `path` replaced (or deleted for ...)."""
    if not path:
        return value
    if isinstance(record, dict):
        keys = sorted(record)
        if not keys:
            return record
        key = keys[path[0] % len(keys)]
        copy = dict(record)
        if value is Ellipsis and len(path) == 1:
            del copy[key]  # Ellipsis at the end of the path: delete
        else:
            copy[key] = _damage(record[key], path[1:], value)
        return copy
    if isinstance(record, list) and record:
        i = path[0] % len(record)
        copy_list = list(record)
        if value is Ellipsis and len(path) == 1:
            del copy_list[i]
        else:
            copy_list[i] = _damage(record[i], path[1:], value)
        return copy_list
    return None if value is Ellipsis else value


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=6,
)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    path=st.lists(st.integers(min_value=0, max_value=50), min_size=1, max_size=5),
    value=_json | st.just(Ellipsis),
)
def test_damaged_checkpoints_raise_checkpoint_error(path: list[int], value: Any) -> None:
    async def scenario() -> None:
        f = flows()
        store = InMemoryCheckpointStore()
        run = await f.build_pipeline().run("a b c", checkpoint_store=store)
        ckpt_id = (await store.list_checkpoints(run_id=run.run_id))[2].checkpoint_id
        key = f"wf:ckpt:{ckpt_id}"
        # damaged, then sealed again: past the integrity check, the record's own checks
        damaged = _damage(unseal(await store.store.get(key), where="test"), path, value)
        await store.store.put(key, seal(damaged))
        try:
            resumed = await f.build_pipeline().resume(ckpt_id, checkpoint_store=store)
        except CheckpointError:
            return
        except Exception as exc:  # a damaged value may still decode; then the run may fail
            from cantata.core import WorkflowError

            assert isinstance(exc, WorkflowError), f"{type(exc).__name__}: {exc}"
            return
        assert resumed.status in ("idle", "idle_with_pending_requests")

    asyncio.run(scenario())


@settings(max_examples=100, deadline=None)
@given(pick=st.integers(min_value=0, max_value=1000), value=_json)
def test_damaged_values_and_log_entries_raise_checkpoint_error(pick: int, value: Any) -> None:
    async def scenario() -> None:
        f = flows()
        raw = MemoryStore()
        store = StateStoreCheckpointStore(raw)
        run = await f.build_pipeline().run("a b c", checkpoint_store=store)
        ckpt = (await store.list_checkpoints(run_id=run.run_id))[4]
        values = await raw.keys("wf:val:")
        logs = [name for seg in ckpt.logs.values() for name, _ in seg]
        targets = [("value", k) for k in values] + [("log", f"wf:log:{n}") for n in logs]
        kind, key = targets[pick % len(targets)]
        # sealed as the checkpointing seals them: past the integrity check, the decoding
        if kind == "value":
            await raw.put(key, seal(value))
        else:
            await raw.delete_log(key)
            await raw.append(key, [seal(value)])
        try:
            await f.build_pipeline().resume(ckpt.checkpoint_id, checkpoint_store=store)
        except CheckpointError:
            return
        except Exception as exc:
            from cantata.core import WorkflowError

            assert isinstance(exc, WorkflowError), f"{type(exc).__name__}: {exc}"

    asyncio.run(scenario())


@pytest.mark.parametrize("record", ["", [], {"schema_version": 1}, None, 3])
async def test_records_that_are_not_checkpoints_are_refused(record: Any) -> None:
    with pytest.raises(CheckpointError, match="checkpoint 'x'"):
        WorkflowCheckpoint.from_record(record, checkpoint_id="x")


class CountingStore(MemoryStore):
    """Counts the JSON characters written, to show what a checkpoint costs."""

    def __init__(self) -> None:
        super().__init__()
        self.written = 0

    async def append(self, log: str, entries: Sequence[Any]) -> int:
        self.written += sum(len(json.dumps(e)) for e in entries)
        return await super().append(log, entries)

    async def put_many(self, items: Mapping[str, Any]) -> None:
        self.written += sum(len(json.dumps(v)) for v in items.values())
        await super().put_many(items)


async def test_the_cost_of_a_checkpoint_does_not_grow_with_the_saved_conversation() -> None:
    @executor
    async def chat(turn: int, ctx: WorkflowContext[int]) -> None:
        log = ctx.log("conversation")
        log.append(f"message number {turn:06d}")
        ctx.set_executor_state({"turns": turn})
        if turn < 400:
            await ctx.send_message(turn + 1)

    raw = CountingStore()
    store = StateStoreCheckpointStore(raw)
    costs: list[int] = []

    class Probe(StateStoreCheckpointStore):
        async def save(self, checkpoint: WorkflowCheckpoint, **kw: Any) -> None:
            before = raw.written
            await store.save(checkpoint, **kw)
            costs.append(raw.written - before)

    wf = WorkflowBuilder(chat, max_supersteps=1000).add_edge(chat, chat).build()
    result = await wf.run(1, checkpoint_store=Probe(raw))
    assert len(costs) == 401  # the entry checkpoint, then one per superstep
    assert max(costs[300:]) <= costs[10] + 16  # ids are fixed-size; only digits vary
    run = await wf.restore(result.checkpoint_id or "", checkpoint_store=store)
    assert run.status == "idle" and len(run._state.logs["chat/conversation"]) == 400


async def test_resume_stream_yields_the_rest_of_the_run_live() -> None:
    from cantata.workflows import OutputEvent, WorkflowStartedEvent

    f = flows()
    store = InMemoryCheckpointStore()
    full = await f.build_pipeline().run("a b c", checkpoint_store=store)
    third = (await store.list_checkpoints(run_id=full.run_id))[2]
    stream = f.build_pipeline().resume_stream(third.checkpoint_id, checkpoint_store=store)
    events = [e async for e in stream]
    assert isinstance(events[0], WorkflowStartedEvent)
    assert events[0].resumed_from == third.checkpoint_id
    new_outputs = [e.data for e in events if isinstance(e, OutputEvent)]
    assert new_outputs == full.outputs[-len(new_outputs) :] and new_outputs
    assert stream.result.outputs == full.outputs


async def test_agent_chains_checkpoint_conversations_by_reference() -> None:
    from cantata.agents import ChatAgent
    from cantata.models import ScriptedChatClient
    from cantata.workflows import AgentExecutorResponse

    def build() -> Any:
        agent = ChatAgent(ScriptedChatClient(lambda m, o: f"reply {len(m)}"), name="talker")

        @executor
        async def again(r: AgentExecutorResponse, ctx: WorkflowContext[str, int]) -> None:
            if len(r.full_conversation) < 120:
                await ctx.send_message(f"turn {len(r.full_conversation)}")
            else:
                await ctx.yield_output(len(r.full_conversation))

        return (
            WorkflowBuilder(agent, name="talk", max_supersteps=200)
            .add_edge(agent, again)
            .add_edge(again, agent)
            .build()
        )

    raw = CountingStore()
    costs: list[int] = []

    class Probe(StateStoreCheckpointStore):
        async def save(self, checkpoint: WorkflowCheckpoint, **kw: Any) -> None:
            before = raw.written
            await super().save(checkpoint, **kw)
            costs.append(raw.written - before)

    probe = Probe(raw)
    result = await build().run("start", checkpoint_store=probe)
    assert result.outputs == [120]
    agent_steps = costs[1::2]  # supersteps where the agent's response is in flight
    assert max(agent_steps[-5:]) < 2 * agent_steps[2], agent_steps
    checkpoints = await probe.list_checkpoints(run_id=result.run_id)
    middle = next(
        c for c in checkpoints[len(checkpoints) // 2 :] if c.messages[0]["target"] == "again"
    )
    assert middle.messages[0].get("conversation") is not None
    resumed = await build().resume(middle.checkpoint_id, checkpoint_store=probe)
    assert resumed.outputs == result.outputs


async def test_state_and_executor_state_set_to_none_survive_a_resume() -> None:
    @executor
    async def clear(value: int, ctx: WorkflowContext[int]) -> None:
        ctx.set_state("k", None)
        ctx.set_executor_state(None)
        await ctx.send_message(value + 1)

    @executor
    async def show(value: int, ctx: WorkflowContext[None, Any]) -> None:
        await ctx.yield_output((value, ctx.get_state("k", "unset")))

    store = InMemoryCheckpointStore()
    wf = WorkflowBuilder(clear).add_edge(clear, show).build()
    full = await wf.run(1, checkpoint_store=store)
    assert full.outputs == [(2, None)]
    first = (await store.list_checkpoints(run_id=full.run_id))[0]
    resumed = await wf.resume(first.checkpoint_id, checkpoint_store=store)
    assert resumed.outputs == full.outputs
    assert resumed.run._state.state == {"k": None}
    assert resumed.run._state.executor_states == {"clear": None}


async def test_a_requested_answer_type_is_still_checked_after_a_restore() -> None:
    from cantata.core import WorkflowError
    from cantata.workflows import Executor, handler, response_handler

    flows_ = flows()

    class Narrow(Executor):
        @handler
        async def ask(self, value: int, ctx: WorkflowContext[None, Any]) -> None:
            await ctx.request_info(flows_.Question("how many?"), response_type=int)

        @response_handler
        async def got(
            self, request: Any, answer: int | str, ctx: WorkflowContext[None, Any]
        ) -> None:
            await ctx.yield_output(answer)

    store = InMemoryCheckpointStore()
    wf = WorkflowBuilder(Narrow("narrow")).build()
    first = await wf.run(1, checkpoint_store=store)
    [request] = first.pending_requests
    assert request.response_type is int
    run = await wf.restore(first.checkpoint_id or "", checkpoint_store=store)
    assert [r.response_type for r in run.pending_requests] == [int]
    with pytest.raises(WorkflowError, match="must be a int, not a str"):
        await run.send_responses({request.request_id: "three"})
    assert (await run.send_responses({request.request_id: 3})).outputs == [3]


@pytest.mark.parametrize("damage", ["binary", "directory", "truncated"])
async def test_damaged_checkpoint_files_raise_checkpoint_error(tmp_path: Path, damage: str) -> None:
    f = flows()
    store = FileCheckpointStore(tmp_path)
    run = await f.build_pipeline().run("a b c", checkpoint_store=store)
    ckpt = (await store.list_checkpoints(run_id=run.run_id))[3]
    [record] = (tmp_path / "values").glob(f"wf%3Ackpt%3A{ckpt.checkpoint_id}.json")
    if damage == "binary":
        record.write_bytes(b"\xff\xfe\x00")
    elif damage == "directory":
        record.unlink()
        record.mkdir()
    else:
        record.write_text(record.read_text()[:40])
    with pytest.raises(CheckpointError, match=f"checkpoint '{ckpt.checkpoint_id}' cannot be read"):
        await f.build_pipeline().resume(ckpt.checkpoint_id, checkpoint_store=store)


async def test_a_fan_in_of_agents_checkpoints_conversations_by_reference() -> None:
    from cantata.workflows import AgentExecutorResponse

    def build() -> Any:
        x, y = _counting_agent("x"), _counting_agent("y")

        @executor
        async def split(text: str, ctx: WorkflowContext[str]) -> None:
            await ctx.send_message(text)

        @executor
        async def again(
            responses: list[AgentExecutorResponse], ctx: WorkflowContext[str, int]
        ) -> None:
            size = len(responses[0].full_conversation)
            if size < 120:
                await ctx.send_message(f"turn {size}")
            else:
                await ctx.yield_output(size)

        return (
            WorkflowBuilder(split, name="rounds", max_supersteps=300)
            .add_fan_out_edges(split, [x, y])
            .add_fan_in_edges([x, y], again)
            .add_edge(again, split)
            .build()
        )

    raw = CountingStore()
    costs: list[int] = []

    class Probe(StateStoreCheckpointStore):
        async def save(self, checkpoint: WorkflowCheckpoint, **kw: Any) -> None:
            before = raw.written
            await super().save(checkpoint, **kw)
            costs.append(raw.written - before)

    probe = Probe(raw)
    result = await build().run("start", checkpoint_store=probe)
    assert result.outputs == [120]
    fan_in_steps = costs[1::3]  # supersteps where the fan-in's list is in flight
    assert max(fan_in_steps[-5:]) < 2 * fan_in_steps[2], fan_in_steps
    checkpoints = await probe.list_checkpoints(run_id=result.run_id)
    for ckpt in checkpoints[-6:]:
        resumed = await build().resume(ckpt.checkpoint_id, checkpoint_store=probe)
        assert resumed.outputs == result.outputs


async def test_a_checkpoint_that_could_not_be_written_does_not_break_the_next() -> None:
    @executor
    async def send_odd(value: int, ctx: WorkflowContext[Unregistered]) -> None:
        ctx.log("notes").append(f"sent {value}")
        await ctx.send_message(Unregistered())

    @executor
    async def take_odd(value: Unregistered, ctx: WorkflowContext[None, str]) -> None:
        ctx.log("notes", shared=True).append("taken")
        await ctx.yield_output("taken")

    store = InMemoryCheckpointStore()
    wf = WorkflowBuilder(send_odd).add_edge(send_odd, take_odd).build()
    run = wf._new_run(
        1, runtime=None, checkpoint_store=store, kwargs=None, executor_kwargs=None, run_id=None
    )
    with pytest.raises(UnknownTypeError):
        await run.continue_run()  # the message in flight cannot be saved
    done = await run.continue_run()  # it is delivered; the next checkpoint holds the logs
    assert done.outputs == ["taken"] and done.checkpoint_id is not None
    restored = await wf.restore(done.checkpoint_id, checkpoint_store=store)
    assert restored._state.logs == {"send_odd/notes": ["sent 1"], "*/notes": ["taken"]}


async def test_a_store_that_fails_after_appending_does_not_break_the_next_save() -> None:
    class FailsOnce(MemoryStore):
        failed = False

        async def put_many(self, items: Mapping[str, Any]) -> None:
            if not self.failed:
                self.failed = True
                raise OSError("disk full")  # after the log appends of this save
            await super().put_many(items)

    @executor
    async def chat(turn: int, ctx: WorkflowContext[int, int]) -> None:
        ctx.log("conversation").append(turn)
        await ctx.yield_output(turn)
        if turn < 3:
            await ctx.send_message(turn + 1)

    store = StateStoreCheckpointStore(FailsOnce())
    wf = WorkflowBuilder(chat).add_edge(chat, chat).build()
    run = wf._new_run(
        1, runtime=None, checkpoint_store=store, kwargs=None, executor_kwargs=None, run_id=None
    )
    with pytest.raises(OSError, match="disk full"):
        await run.continue_run()
    done = await run.continue_run()
    assert done.outputs == [1, 2, 3]
    for ckpt in await store.list_checkpoints(run_id=done.run_id):
        resumed = await wf.resume(ckpt.checkpoint_id, checkpoint_store=store)
        assert resumed.outputs == [1, 2, 3]
        assert resumed.run._state.logs == {"chat/conversation": [1, 2, 3]}


async def test_a_checkpoint_of_a_differently_wired_graph_is_refused() -> None:
    @executor
    async def a(value: int, ctx: WorkflowContext[int]) -> None:
        await ctx.send_message(value)

    @executor
    async def b(value: int, ctx: WorkflowContext[int, int]) -> None:
        await ctx.yield_output(value)
        await ctx.send_message(value)

    @executor
    async def c(values: list[int], ctx: WorkflowContext[None, int]) -> None:
        await ctx.yield_output(sum(values))

    def build(edges_first: bool) -> Any:
        builder = WorkflowBuilder(a, name="same")
        if edges_first:
            return builder.add_edge(a, b).add_fan_in_edges([a, b], c).build()
        return builder.add_fan_in_edges([a, b], c).add_edge(a, b).build()

    store = InMemoryCheckpointStore()
    first = await build(True).run(2, checkpoint_store=store)
    ckpt = (await store.list_checkpoints(run_id=first.run_id))[0]
    assert (await build(True).resume(ckpt.checkpoint_id, checkpoint_store=store)).outputs == [
        2,
        4,
    ]
    with pytest.raises(CheckpointError, match="edges differ"):
        await build(False).resume(ckpt.checkpoint_id, checkpoint_store=store)


async def test_a_fan_in_buffer_holds_agent_conversations_by_reference() -> None:
    from cantata.workflows import AgentExecutorResponse

    def build() -> Any:
        x, y = _counting_agent("x"), _counting_agent("y")

        @executor
        async def split(text: str, ctx: WorkflowContext[str]) -> None:
            await ctx.send_message(text)

        @executor
        async def relay(text: str, ctx: WorkflowContext[str]) -> None:
            await ctx.send_message(text)  # y answers a superstep after x: x's reply waits

        @executor
        async def again(
            responses: list[AgentExecutorResponse], ctx: WorkflowContext[str, int]
        ) -> None:
            size = len(responses[0].full_conversation)
            if size < 120:
                await ctx.send_message(f"turn {size}")
            else:
                await ctx.yield_output(size)

        return (
            WorkflowBuilder(split, name="uneven", max_supersteps=400)
            .add_fan_out_edges(split, [x, relay])
            .add_edge(relay, y)
            .add_fan_in_edges([x, y], again)
            .add_edge(again, split)
            .build()
        )

    raw = CountingStore()
    costs: list[int] = []

    class Probe(StateStoreCheckpointStore):
        async def save(self, checkpoint: WorkflowCheckpoint, **kw: Any) -> None:
            before = raw.written
            await super().save(checkpoint, **kw)
            costs.append(raw.written - before)

    probe = Probe(raw)
    result = await build().run("start", checkpoint_store=probe)
    assert result.outputs == [120]
    waiting = costs[1::4]  # supersteps that end with x's reply waiting in the buffer
    assert max(waiting[-5:]) < 2 * waiting[2], waiting
    checkpoints = await probe.list_checkpoints(run_id=result.run_id)
    assert checkpoints[-7].fan_in, "a checkpoint with x's reply waiting"
    for ckpt in checkpoints[-8:]:
        resumed = await build().resume(ckpt.checkpoint_id, checkpoint_store=probe)
        assert resumed.outputs == result.outputs


async def test_a_message_its_target_cannot_take_is_a_damaged_checkpoint() -> None:
    f = flows()
    store = InMemoryCheckpointStore()
    run = await f.build_pipeline().run("a b c", checkpoint_store=store)
    ckpt = (await store.list_checkpoints(run_id=run.run_id))[1]  # after the entry one
    record = unseal(await store.store.get(f"wf:ckpt:{ckpt.checkpoint_id}"), where="test")
    record["messages"][0]["message"] = 42  # the workers take lists of words
    await store.store.put(f"wf:ckpt:{ckpt.checkpoint_id}", seal(record))
    with pytest.raises(CheckpointError, match="holds a int for executor 'worker0'"):
        await f.build_pipeline().resume(ckpt.checkpoint_id, checkpoint_store=store)


def _counting_agent(name: str) -> Any:
    """An agent executor whose scripted model answers with its name and the request size."""
    from cantata.agents import ChatAgent
    from cantata.models import ScriptedChatClient
    from cantata.workflows import AgentExecutor

    client = ScriptedChatClient(lambda m, o: f"{name} {len(m)}")
    return AgentExecutor(ChatAgent(client, name=name))
