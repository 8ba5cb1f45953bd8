"""Property: a run resumed from any of its checkpoints ends exactly like the run that never
stopped (same outputs, shared state, executor state, logs, fan-in buffers), over random
small graphs: chains, fan-out (all or a selection), fan-in, switch/case, conditional edges,
cycles, executors that keep state and shared state, and requests for human input."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from cantata.core import WorkflowError, register
from cantata.workflows import (
    Case,
    Default,
    Executor,
    InMemoryCheckpointStore,
    Workflow,
    WorkflowBuilder,
    WorkflowContext,
    WorkflowRunResult,
    handler,
    response_handler,
)


@register(name="tests.workflows.resume_property.Tok")
@dataclass(frozen=True)
class Tok:
    value: int
    ttl: int


@register(name="tests.workflows.resume_property.Ask")
@dataclass(frozen=True)
class Ask:
    value: int
    ttl: int


class Node(Executor):
    """Keeps a tuple (or None) as executor state, writes its own and a common state key,
    appends to its own and a shared log, yields outputs, and sometimes asks a person."""

    def __init__(self, id: str, asks: bool, fail: dict[str, int] | None = None) -> None:
        super().__init__(id)
        self.asks = asks
        self.fail = fail if fail is not None else {}

    def _maybe_fail(self) -> None:
        """Fail once, at the n-th handler call of the run (counted over every node)."""
        if "left" in self.fail:
            self.fail["left"] -= 1
            if self.fail["left"] == 0:
                del self.fail["left"]
                raise RuntimeError(f"{self.id} failed once")

    def _step(self, value: int, ttl: int, ctx: WorkflowContext[Tok, Any]) -> None:
        count, total = ctx.get_executor_state() or (0, 0)
        last = ctx.get_state("last", 0)
        new = (value * 3 + total + (last or 0) + count) % 97
        ctx.set_executor_state(None if new % 7 == 0 else (count + 1, total + value))
        ctx.set_state("last", None if new % 5 == 0 else new)
        ctx.set_state(f"seen.{self.id}", (count, new))
        ctx.log("values").append(new)
        ctx.log("trace", shared=True).append(f"{self.id}:{new}")
        ctx.yield_output((self.id, value, new, count))
        if ttl > 0:
            ctx.send_message(Tok(new, ttl - 1))

    @handler
    async def take(self, tok: Tok, ctx: WorkflowContext[Tok, Any]) -> None:
        self._maybe_fail()
        if self.asks and tok.value % 3 == 0 and tok.ttl > 0:
            ctx.request_info(Ask(tok.value, tok.ttl))
            return
        self._step(tok.value, tok.ttl, ctx)

    @handler
    async def take_all(self, toks: list[Tok], ctx: WorkflowContext[Tok, Any]) -> None:
        self._maybe_fail()
        self._step(sum(t.value for t in toks) + len(toks), min(t.ttl for t in toks), ctx)

    @response_handler
    async def answered(self, ask: Ask, answer: int, ctx: WorkflowContext[Tok, Any]) -> None:
        self._maybe_fail()
        self._step(ask.value + answer, ask.ttl, ctx)


@dataclass(frozen=True)
class Spec:
    """A graph: node count, which nodes ask, and edge groups by node index."""

    size: int
    asks: tuple[bool, ...]
    groups: tuple[tuple[Any, ...], ...]
    ttl: int
    placement: str


@st.composite
def specs(draw: st.DrawFn) -> Spec:
    size = draw(st.integers(2, 6))
    groups: list[tuple[Any, ...]] = []
    # every node i > 0 is reached from some earlier node, so build() accepts the graph
    for i in range(1, size):
        j = draw(st.integers(0, i - 1))
        kind = draw(st.sampled_from(["single", "cond", "fan_out", "select", "switch", "fan_in"]))
        if kind in ("single", "cond"):
            groups.append((kind, j, i, draw(st.integers(2, 4))))
        elif kind in ("fan_out", "select"):
            extra = draw(st.lists(st.integers(0, size - 1), max_size=2))
            groups.append((kind, j, tuple(dict.fromkeys([i, *extra]))))
        elif kind == "switch":
            other = draw(st.integers(0, size - 1))
            groups.append(("switch", j, i, other, draw(st.integers(2, 3))))
        else:
            more = draw(st.lists(st.integers(0, size - 1), max_size=2))
            sources = tuple(dict.fromkeys([j, *(m for m in more if m != i)]))
            groups.append(("fan_in", sources, i))
    for _ in range(draw(st.integers(0, 2))):  # extra edges, cycles included
        groups.append(("single", draw(st.integers(0, size - 1)), draw(st.integers(0, size - 1)), 3))
    asks = tuple(draw(st.booleans()) for _ in range(size))
    return Spec(
        size,
        asks,
        _once(groups),
        draw(st.integers(2, 5)),
        draw(st.sampled_from(["run", "executor"])),
    )


def _once(groups: list[tuple[Any, ...]]) -> tuple[tuple[Any, ...], ...]:
    """The groups with no edge drawn twice (build() refuses that): an edge already drawn is
    left out of a later group (a group left with none is dropped, a switch keeps its other
    branch for both). A node stays reachable: the edge left out already reaches it."""
    seen: set[tuple[int, int]] = set()
    out: list[tuple[Any, ...]] = []
    for g in groups:
        kind = g[0]
        if kind in ("fan_out", "select"):
            targets = tuple(t for t in g[2] if (g[1], t) not in seen)
            g = (kind, g[1], targets)
            pairs = [(g[1], t) for t in targets]
        elif kind == "switch":
            fresh = [t for t in (g[2], g[3]) if (g[1], t) not in seen]
            if fresh:
                g = (kind, g[1], fresh[0], fresh[-1], g[4])
            pairs = [(g[1], t) for t in fresh]
        elif kind == "fan_in":
            sources = tuple(x for x in g[1] if (x, g[2]) not in seen)
            g = (kind, sources, g[2])
            pairs = [(x, g[2]) for x in sources]
        else:
            pairs = [(g[1], g[2])] if (g[1], g[2]) not in seen else []
        if pairs:
            seen.update(pairs)
            out.append(g)
    return tuple(out)


def build(spec: Spec, fail: dict[str, int] | None = None) -> Workflow:
    nodes = [Node(f"n{i}", spec.asks[i], fail) for i in range(spec.size)]
    b = WorkflowBuilder(nodes[0], name="prop", max_supersteps=200, placement=spec.placement)  # type: ignore[arg-type]
    for g in spec.groups:
        kind = g[0]
        if kind == "single":
            b.add_edge(nodes[g[1]], nodes[g[2]])
        elif kind == "cond":
            k = g[3]
            b.add_edge(nodes[g[1]], nodes[g[2]], condition=lambda m, k=k: m.value % k != 0)
        elif kind == "fan_out":
            b.add_fan_out_edges(nodes[g[1]], [nodes[t] for t in g[2]])
        elif kind == "select":
            b.add_fan_out_edges(
                nodes[g[1]],
                [nodes[t] for t in g[2]],
                selection=lambda m, ids: ids[: 1 + m.value % len(ids)],
            )
        elif kind == "switch":
            k = g[4]
            b.add_switch_case_edges(
                nodes[g[1]],
                [Case(lambda m, k=k: m.value % k == 0, nodes[g[2]]), Default(nodes[g[3]])],
            )
        else:
            b.add_fan_in_edges([nodes[s] for s in g[1]], nodes[g[2]])
    return b.build()


async def finish(result: WorkflowRunResult) -> WorkflowRunResult:
    """Answer every request (the answer depends only on the request) until the run is idle;
    a call that fails is made again (a failed superstep gives its work back)."""
    rounds = 0
    while result.pending_requests and rounds < 20:
        rounds += 1
        answers = {r.request_id: r.data.value % 4 + 1 for r in result.pending_requests}
        try:
            result = await result.send_responses(answers)
        except WorkflowError:
            result = await result.run.continue_run()
    return result


def snapshot(result: WorkflowRunResult) -> dict[str, Any]:
    state = result.run._state
    return {
        "status": result.status,
        "outputs": list(result.outputs),
        "state": dict(state.state),
        "executors": dict(state.executor_states),
        "logs": {k: list(v) for k, v in state.logs.items()},
        "fan_in": state.fan_in,
        "requests": sorted(repr(r.data) for r in state.requests.values()),
    }


@settings(max_examples=60, deadline=None)
@given(spec=specs())
def test_resume_from_every_checkpoint_equals_the_uninterrupted_run(spec: Spec) -> None:
    async def scenario() -> None:
        store = InMemoryCheckpointStore()
        full = await finish(await build(spec).run(Tok(1, spec.ttl), checkpoint_store=store))
        expected = snapshot(full)
        checkpoints = await store.list_checkpoints(run_id=full.run_id)
        assert checkpoints, "every run has at least one superstep"
        for ckpt in checkpoints:
            resumed = await build(spec).resume(ckpt.checkpoint_id, checkpoint_store=store)
            resumed = await finish(resumed)
            assert snapshot(resumed) == expected, f"from superstep {ckpt.superstep}"

    asyncio.run(scenario())


@settings(max_examples=40, deadline=None)
@given(spec=specs(), fail_at=st.integers(1, 12))
def test_a_run_that_failed_once_and_was_continued_equals_the_uninterrupted_run(
    spec: Spec, fail_at: int
) -> None:
    async def scenario() -> None:
        expected = snapshot(await finish(await build(spec).run(Tok(1, spec.ttl))))
        fail = {"left": fail_at}
        run = build(spec, fail)._new_run(
            Tok(1, spec.ttl),
            runtime=None,
            checkpoint_store=None,
            kwargs=None,
            executor_kwargs=None,
            run_id=None,
        )
        try:
            result = await run.continue_run()
        except WorkflowError:
            assert run.status == "failed"
            result = await run.continue_run()
        assert snapshot(await finish(result)) == expected

    asyncio.run(scenario())
