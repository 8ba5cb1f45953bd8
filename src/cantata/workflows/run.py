"""`WorkflowRun`: one run of a workflow, with its committed state.

A run is driven by calls (`Workflow.run`, `send_responses`, `Workflow.resume`); between two
calls it is idle and holds nothing but data, so it may wait for a person for days, or be
dropped and resumed from its last checkpoint in another process.

Deliberate repetition: the constructor assigns its fields one by one, the shape of every
plain constructor (`AgentResponse`'s too).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ..core import CancellationToken, ConfigurationError, WorkflowError
from ._typing import accepts_value, type_name
from .events import RequestInfoEvent, RunStatus, WorkflowEvent
from .placement import drive_placed
from .result import WorkflowRunResult
from .runner import Runner, RunState
from .stream import WorkflowEventStream

if TYPE_CHECKING:
    from ..runtime import AgentRuntime
    from .checkpoint_store import CheckpointStore
    from .graph import WorkflowGraph
    from .journal import EffectJournal

__all__ = ["WorkflowRun"]


def _discard(event: WorkflowEvent) -> None:
    """The sink of a run whose events nobody asked for."""


class WorkflowRun:
    """A run of a workflow: answer its requests, continue it, read its outputs."""

    def __init__(
        self,
        workflow: WorkflowGraph,
        state: RunState,
        *,
        runtime: AgentRuntime | None,
        checkpoint_store: CheckpointStore | None,
        kwargs: Mapping[str, Mapping[str, Any]],
        journal: EffectJournal | None = None,
    ) -> None:
        self.workflow = workflow
        self._state = state
        self._runtime = runtime
        self._store = checkpoint_store
        self._kwargs = kwargs
        self._journal = journal
        self._busy = False
        self._saved_into = checkpoint_store
        """The store of the run's last checkpoint (its checkpoints are incremental)."""

    @property
    def run_id(self) -> str:
        """The run's id (kept across resumes)."""
        return self._state.run_id

    @property
    def status(self) -> RunStatus:
        """Where the run stands after the last call that drove it."""
        return self._state.status

    @property
    def outputs(self) -> list[Any]:
        """Every output yielded so far."""
        return list(self._state.outputs)

    @property
    def checkpoint_id(self) -> str | None:
        """The run's last checkpoint (None without a checkpoint store)."""
        return self._state.checkpoint_id

    @property
    def pending_requests(self) -> list[RequestInfoEvent]:
        """Requests for input waiting for an answer."""
        return [
            RequestInfoEvent(r.executor_id, r.request_id, r.data, r.response_type)
            for r in self._state.requests.values()
        ]

    @property
    def checkpoint_store(self) -> CheckpointStore | None:
        """Where each superstep is checkpointed (None: nowhere; `save_checkpoint` saves when
        asked)."""
        return self._store

    def detach_checkpoint_store(self) -> None:
        """Stop checkpointing each superstep; `save_checkpoint(store)` into the store of the
        last checkpoint still writes only what changed since."""
        self._check_idle()
        self._store = None

    async def save_checkpoint(self, store: CheckpointStore) -> str:
        """Checkpoint the run as it stands between two calls into `store`; returns the id.

        A run without a checkpoint store writes nothing as it goes: this is how it saves
        when asked (a team's `save_state`). Checkpoints are incremental, so `store` must be
        the store of the run's last checkpoint, if it has one."""
        self._check_idle()
        if self._state.checkpoint_id is not None and store is not self._saved_into:
            raise ConfigurationError(
                f"run {self.run_id!r} was last checkpointed into another store, and a "
                "checkpoint holds only what changed since the previous one: save into that "
                "store (or restore the run from the new one first)"
            )
        from .checkpointing import save_checkpoint

        checkpoint_id = await save_checkpoint(self.workflow, self._state, store)
        self._saved_into = store
        return checkpoint_id

    def _accept(self, responses: Mapping[str, Any]) -> None:
        """Check every answer (known request, right type) before taking any of them."""
        self._check_idle()
        requests = self._state.requests
        for request_id, answer in responses.items():
            request = requests.get(request_id)
            if request is None:
                raise WorkflowError(
                    f"run {self.run_id!r} has no pending request {request_id!r}; pending: "
                    f"{sorted(requests)}"
                )
            rtype = request.response_type
            if rtype is not None and not accepts_value(rtype, answer):
                raise WorkflowError(
                    f"the answer to request {request_id!r} of executor {request.executor_id!r} "
                    f"must be a {type_name(rtype)}, not a {type_name(type(answer))}; "
                    "nothing was sent"
                )
        for request_id, answer in responses.items():
            self._state.answers.append((requests.pop(request_id), answer))

    def _check_idle(self) -> None:
        if self._busy:
            raise WorkflowError(
                f"run {self.run_id!r} is already being driven; wait for that call to return "
                "before answering or continuing it (nothing was taken)"
            )

    async def send_responses(
        self,
        responses: Mapping[str, Any],
        *,
        cancellation_token: CancellationToken | None = None,
        include_events: bool = False,
    ) -> WorkflowRunResult:
        """Answer pending requests by id (all are checked first) and continue the run
        (``include_events=True``: the result keeps the continuation's events)."""
        self._accept(responses)
        return await self._drive_collect(
            cancellation_token=cancellation_token, include_events=include_events
        )

    def send_responses_stream(
        self, responses: Mapping[str, Any], *, cancellation_token: CancellationToken | None = None
    ) -> WorkflowEventStream:
        """Answer pending requests and stream the continuation's events."""
        self._accept(responses)
        return self._drive_stream(cancellation_token=cancellation_token)

    async def continue_run(
        self,
        *,
        cancellation_token: CancellationToken | None = None,
        include_events: bool = False,
    ) -> WorkflowRunResult:
        """Continue a restored run with the messages that were in flight at its checkpoint."""
        return await self._drive_collect(
            cancellation_token=cancellation_token, include_events=include_events
        )

    def continue_run_stream(
        self, *, cancellation_token: CancellationToken | None = None
    ) -> WorkflowEventStream:
        """Continue a restored run and stream its events."""
        return self._drive_stream(cancellation_token=cancellation_token)

    # -- driving -------------------------------------------------------------------------

    async def _drive(
        self,
        sink: Callable[[WorkflowEvent], None],
        *,
        streaming: bool,
        cancellation_token: CancellationToken | None,
        resumed_from: str | None,
        observed: bool = True,
    ) -> RunStatus:
        self._check_idle()
        self._busy = True
        token = cancellation_token or CancellationToken()
        try:
            runner = Runner(
                self.workflow,
                self._state,
                dispatch=None,
                store=self._store,
                kwargs=self._kwargs,
                streaming=streaming,
                cancellation_token=token,
                observed=observed,
                journal=self._journal,
            )
            return await drive_placed(
                runner,
                sink,
                runtime=self._runtime,
                resumed_from=resumed_from,
                cancellation_token=token,
            )
        finally:
            self._busy = False

    def _result(self, status: RunStatus, events: list[WorkflowEvent] | None) -> WorkflowRunResult:
        return WorkflowRunResult(
            self,
            status,
            list(self._state.outputs),
            checkpoint_id=self._state.checkpoint_id,
            collected=events,
        )

    async def _drive_collect(
        self,
        *,
        cancellation_token: CancellationToken | None = None,
        resumed_from: str | None = None,
        include_events: bool = False,
    ) -> WorkflowRunResult:
        events: list[WorkflowEvent] | None = [] if include_events else None
        status = await self._drive(
            _discard if events is None else events.append,
            streaming=False,
            cancellation_token=cancellation_token,
            resumed_from=resumed_from,
            observed=include_events,
        )
        return self._result(status, events)

    async def _drive_into(
        self,
        sink: Callable[[WorkflowEvent], None],
        *,
        cancellation_token: CancellationToken | None = None,
        resumed_from: str | None = None,
    ) -> WorkflowRunResult:
        """Drive in streaming mode, sending every event to `sink` as it happens (they are
        made anyway, so the result keeps them too)."""
        events: list[WorkflowEvent] = []

        def both(event: WorkflowEvent) -> None:
            events.append(event)
            sink(event)

        status = await self._drive(
            both, streaming=True, cancellation_token=cancellation_token, resumed_from=resumed_from
        )
        return self._result(status, events)

    def _drive_stream(
        self,
        *,
        cancellation_token: CancellationToken | None = None,
        resumed_from: str | None = None,
    ) -> WorkflowEventStream:
        async def produce(sink: Callable[[WorkflowEvent], None]) -> WorkflowRunResult:
            return await self._drive_into(
                sink, cancellation_token=cancellation_token, resumed_from=resumed_from
            )

        return WorkflowEventStream(produce)

    def __repr__(self) -> str:
        return f"WorkflowRun(run_id={self.run_id!r}, status={self.status!r})"
