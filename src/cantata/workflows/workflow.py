"""`Workflow`: an immutable graph definition, and the runs made of it.

A `Workflow` holds no run state: `run()` makes a `WorkflowRun` each time, so any number of
runs proceed at once, isolated. A run that ends idle with pending requests is continued
with `WorkflowRun.send_responses`; a saved run is continued from any checkpoint with
`Workflow.resume`, in this process or a fresh one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ..core import CancellationToken, ConfigurationError, new_id
from ..core._serving import mcp_server
from ._typing import type_name
from .events import WorkflowEvent
from .graph import WorkflowGraph
from .result import WorkflowRunResult
from .runner import Delivery, RunState
from .stream import WorkflowEventStream

if TYPE_CHECKING:
    from ..runtime import AgentRuntime
    from .as_agent import WorkflowAgent
    from .checkpoint_store import CheckpointStore
    from .run import WorkflowRun

__all__ = ["Workflow", "WorkflowRunResult"]


class Workflow(WorkflowGraph):
    """A checked, immutable graph of executors and the runs made of it; build one with
    `WorkflowBuilder`."""

    # -- running -----------------------------------------------------------------------

    def _new_run(
        self,
        message: Any,
        *,
        runtime: AgentRuntime | None,
        checkpoint_store: CheckpointStore | None,
        kwargs: Mapping[str, Any] | None,
        executor_kwargs: Mapping[str, Mapping[str, Any]] | None,
        run_id: str | None,
    ) -> WorkflowRun:
        from .run import WorkflowRun

        start = self.start_executor
        if not start.can_handle(message):
            from ..core import WorkflowError

            raise WorkflowError(
                f"the start executor {start.id!r} of workflow {self.name!r} cannot take a "
                f"{type_name(type(message))}; it takes {[type_name(t) for t in start.input_types]}"
            )
        state = RunState(run_id or new_id())
        state.pending.append(Delivery(start.id, message, []))
        return WorkflowRun(
            self,
            state,
            runtime=runtime,
            checkpoint_store=checkpoint_store or self.checkpoint_store,
            kwargs=self._kwargs(kwargs, executor_kwargs),
        )

    def _kwargs(
        self,
        shared: Mapping[str, Any] | None,
        targeted: Mapping[str, Mapping[str, Any]] | None,
    ) -> dict[str, Mapping[str, Any]]:
        if not shared and not targeted:
            return {}  # every executor gets the runner's empty mapping: nothing to build
        unknown = sorted(set(targeted or {}) - set(self.executors))
        if unknown:
            raise ConfigurationError(
                f"executor_kwargs names executors {unknown} that workflow {self.name!r} does "
                f"not have; its executors are {sorted(self.executors)}"
            )
        base = dict(shared or {})
        return {eid: {**base, **(targeted or {}).get(eid, {})} for eid in self.executors}

    async def run(
        self,
        message: Any,
        *,
        runtime: AgentRuntime | None = None,
        checkpoint_store: CheckpointStore | None = None,
        kwargs: Mapping[str, Any] | None = None,
        executor_kwargs: Mapping[str, Mapping[str, Any]] | None = None,
        run_id: str | None = None,
        cancellation_token: CancellationToken | None = None,
        include_events: bool = False,
    ) -> WorkflowRunResult:
        """Start a run with `message` for the start executor and wait until it is idle.

        `kwargs` reach every executor's `ctx.kwargs`; `executor_kwargs[id]` only that one's.
        With ``include_events=True`` the result keeps every event of the run (`events`).
        Raises `WorkflowError` when an executor fails.
        """
        run = self._new_run(
            message,
            runtime=runtime,
            checkpoint_store=checkpoint_store,
            kwargs=kwargs,
            executor_kwargs=executor_kwargs,
            run_id=run_id,
        )
        return await run._drive_collect(
            cancellation_token=cancellation_token, include_events=include_events
        )

    def run_stream(
        self,
        message: Any,
        *,
        runtime: AgentRuntime | None = None,
        checkpoint_store: CheckpointStore | None = None,
        kwargs: Mapping[str, Any] | None = None,
        executor_kwargs: Mapping[str, Mapping[str, Any]] | None = None,
        run_id: str | None = None,
        cancellation_token: CancellationToken | None = None,
    ) -> WorkflowEventStream:
        """Start a run and iterate its events as they happen (agent chunks included)."""
        run = self._new_run(
            message,
            runtime=runtime,
            checkpoint_store=checkpoint_store,
            kwargs=kwargs,
            executor_kwargs=executor_kwargs,
            run_id=run_id,
        )
        return run._drive_stream(cancellation_token=cancellation_token)

    async def resume(
        self,
        checkpoint_id: str,
        *,
        checkpoint_store: CheckpointStore | None = None,
        responses: Mapping[str, Any] | None = None,
        runtime: AgentRuntime | None = None,
        kwargs: Mapping[str, Any] | None = None,
        executor_kwargs: Mapping[str, Mapping[str, Any]] | None = None,
        cancellation_token: CancellationToken | None = None,
        include_events: bool = False,
    ) -> WorkflowRunResult:
        """Continue a run from a checkpoint (optionally answering its pending requests)."""
        run = await self.restore(
            checkpoint_id,
            checkpoint_store=checkpoint_store,
            runtime=runtime,
            kwargs=kwargs,
            executor_kwargs=executor_kwargs,
        )
        if responses:
            run._accept(responses)
        return await run._drive_collect(
            cancellation_token=cancellation_token,
            resumed_from=checkpoint_id,
            include_events=include_events,
        )

    def resume_stream(
        self,
        checkpoint_id: str,
        *,
        checkpoint_store: CheckpointStore | None = None,
        responses: Mapping[str, Any] | None = None,
        runtime: AgentRuntime | None = None,
        kwargs: Mapping[str, Any] | None = None,
        executor_kwargs: Mapping[str, Mapping[str, Any]] | None = None,
        cancellation_token: CancellationToken | None = None,
    ) -> WorkflowEventStream:
        """Continue a run from a checkpoint and stream its events (loading happens on the
        first iteration)."""

        async def produce(sink: Callable[[WorkflowEvent], None]) -> WorkflowRunResult:
            run = await self.restore(
                checkpoint_id,
                checkpoint_store=checkpoint_store,
                runtime=runtime,
                kwargs=kwargs,
                executor_kwargs=executor_kwargs,
            )
            if responses:
                run._accept(responses)
            return await run._drive_into(
                sink, cancellation_token=cancellation_token, resumed_from=checkpoint_id
            )

        return WorkflowEventStream(produce)

    async def restore(
        self,
        checkpoint_id: str,
        *,
        checkpoint_store: CheckpointStore | None = None,
        runtime: AgentRuntime | None = None,
        kwargs: Mapping[str, Any] | None = None,
        executor_kwargs: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> WorkflowRun:
        """The run saved in a checkpoint, ready to continue (`continue_`, `send_responses`)."""
        from .checkpointing import restore_run
        from .run import WorkflowRun

        store = checkpoint_store or self.checkpoint_store
        if store is None:
            raise ConfigurationError(
                f"workflow {self.name!r} has no checkpoint store: pass checkpoint_store="
            )
        state = await restore_run(self, store, checkpoint_id)
        return WorkflowRun(
            self,
            state,
            runtime=runtime,
            checkpoint_store=store,
            kwargs=self._kwargs(kwargs, executor_kwargs),
        )

    async def replay(
        self,
        checkpoint_id: str,
        *,
        checkpoint_store: CheckpointStore | None = None,
        kwargs: Mapping[str, Any] | None = None,
        executor_kwargs: Mapping[str, Mapping[str, Any]] | None = None,
        include_events: bool = False,
    ) -> WorkflowRunResult:
        """Re-run a recorded run from any of its checkpoints, offline: every effect, effect
        tool and model call is answered from the run's journal (one it lacks is a
        `WorkflowError`: nothing acts) and no checkpoint is written, so a finished run ends
        with the outputs it had. To act anew from a checkpoint, `fork` it."""
        from .checkpointing import restore_run
        from .journal import ReplayJournal, journal_of
        from .run import WorkflowRun

        store = self._store_for(checkpoint_store)
        journal = journal_of(store)
        if journal is None:
            raise ConfigurationError(
                f"workflow {self.name!r}: the checkpoint store {type(store).__name__} keeps no "
                "effect journal to replay from; use a StateStoreCheckpointStore"
            )
        state = await restore_run(self, store, checkpoint_id)
        run = WorkflowRun(
            self,
            state,
            runtime=None,
            checkpoint_store=None,
            kwargs=self._kwargs(kwargs, executor_kwargs),
            journal=ReplayJournal(journal.store),
        )
        return await run._drive_collect(resumed_from=checkpoint_id, include_events=include_events)

    async def fork(
        self,
        checkpoint_id: str,
        *,
        checkpoint_store: CheckpointStore | None = None,
        run_id: str | None = None,
        runtime: AgentRuntime | None = None,
        kwargs: Mapping[str, Any] | None = None,
        executor_kwargs: Mapping[str, Mapping[str, Any]] | None = None,
        include_events: bool = False,
    ) -> WorkflowRunResult:
        """Continue a run from a checkpoint as a new run (a new id, so its effects and model
        calls happen anew and are journaled under it). Lineage is kept: the new run's first
        checkpoint has `checkpoint_id` as its ``parent_id``."""
        from .checkpointing import restore_run
        from .run import WorkflowRun

        store = self._store_for(checkpoint_store)
        state = await restore_run(self, store, checkpoint_id)
        state.run_id = run_id or new_id()
        run = WorkflowRun(
            self,
            state,
            runtime=runtime,
            checkpoint_store=store,
            kwargs=self._kwargs(kwargs, executor_kwargs),
        )
        return await run._drive_collect(resumed_from=checkpoint_id, include_events=include_events)

    def _store_for(self, checkpoint_store: CheckpointStore | None) -> CheckpointStore:
        store = checkpoint_store or self.checkpoint_store
        if store is None:
            raise ConfigurationError(
                f"workflow {self.name!r} has no checkpoint store: pass checkpoint_store="
            )
        return store

    # -- other views -------------------------------------------------------------------

    def as_agent(self, *, name: str | None = None, description: str | None = None) -> WorkflowAgent:
        """This workflow as an `Agent`: usable wherever an agent is."""
        from .as_agent import WorkflowAgent

        return WorkflowAgent(self, name=name, description=description)

    def as_mcp_server(self, *, name: str = "cantata", call_timeout: float | None = 300.0) -> Any:
        """This workflow as an MCP server, one tool per served run: the same server as
        ``cantata.serve.as_mcp_server(workflow)``, which this calls. The serving layer sits
        above this one, so the `cantata` package registers it (`cantata.core._serving`)."""
        return mcp_server(self, kind="workflow", name=name, call_timeout=call_timeout)

    def to_mermaid(self) -> str:
        """The graph as a Mermaid flowchart."""
        from .viz import to_mermaid

        return to_mermaid(self)

    def to_dot(self) -> str:
        """The graph in Graphviz DOT."""
        from .viz import to_dot

        return to_dot(self)
