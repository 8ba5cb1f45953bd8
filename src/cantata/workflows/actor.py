"""How one executor runs its share of a superstep.

An `Invocation` is an executor's work in one superstep of one run (its messages and the
answers to its requests, with read-only views of the committed state); `execute` runs it
and returns a `StepResult` that the runner commits at the boundary. Invocations are run by
the actors of `placement.py`, never by the caller directly.

Live events. A handler's events (an agent's streamed chunks, outputs, requests) must reach
`run_stream` while the handler is still running, not at the end of the superstep. The
invocation carries a `sink`: a callable that the in-process runtime hands over as it is
(messages are not copied in process). A runtime that moves messages to another process
cannot carry a callable; there the sink is to be replaced by one that publishes each event
to the run's topic ``TopicId(EVENTS_TOPIC, run_id)``, to which the caller's stream
subscribes. Executors and the context do not change between the two.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..core import CancellationToken
from .context import PendingRequest, StepResult, WorkflowContext
from .events import (
    ExecutorCompletedEvent,
    ExecutorFailedEvent,
    ExecutorInvokedEvent,
    WorkflowEvent,
)
from .executor import Executor

__all__ = ["EVENTS_TOPIC", "Invocation", "execute"]

EVENTS_TOPIC = "cantata.workflow.events"


@dataclass(slots=True)
class Invocation:
    """One executor's work in one superstep of one run."""

    run_id: str
    executor_id: str
    items: list[tuple[Any, list[str]]]
    """Messages with the ids of the executors that sent them, in arrival order."""
    answers: list[tuple[PendingRequest, Any]] = field(default_factory=list)
    state: Mapping[str, Any] = field(default_factory=dict)
    executor_state: Any = None
    logs: Mapping[str, list[Any]] = field(default_factory=dict)
    """The run's committed logs by key (read-only here; appends go into the result)."""
    targets: frozenset[str] = frozenset()
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    streaming: bool = False
    sink: Callable[[WorkflowEvent], None] = field(default=lambda e: None)
    cancellation_token: CancellationToken = field(default_factory=CancellationToken)


async def execute(executor: Executor, inv: Invocation) -> StepResult:
    """Run an invocation: answers first, then messages, one at a time, in order."""
    result = StepResult(executor.id)
    sink = inv.sink
    eid = executor.id
    for request, answer in inv.answers:
        ctx = _context(executor, inv, result, [])
        ctx.request_id = request.request_id
        sink(ExecutorInvokedEvent(eid, type(answer).__qualname__))
        try:
            await executor._execute_response(request.data, answer, ctx)
        except BaseException as exc:
            sink(ExecutorFailedEvent(eid, exc))
            raise
        sink(ExecutorCompletedEvent(eid))
    for message, sources in inv.items:
        inv.cancellation_token.raise_if_cancelled()
        ctx = _context(executor, inv, result, sources)
        sink(ExecutorInvokedEvent(eid, type(message).__qualname__))
        try:
            await executor._execute(message, ctx)
        except BaseException as exc:
            sink(ExecutorFailedEvent(eid, exc))
            raise
        sink(ExecutorCompletedEvent(eid))
    return result


def _context(
    executor: Executor, inv: Invocation, result: StepResult, sources: list[str]
) -> WorkflowContext[Any, Any]:
    return WorkflowContext(
        executor,
        run_id=inv.run_id,
        source_executor_ids=sources,
        state=inv.state,
        executor_state=inv.executor_state,
        logs=inv.logs,
        targets=inv.targets,
        sink=inv.sink,
        kwargs=inv.kwargs,
        streaming=inv.streaming,
        cancellation_token=inv.cancellation_token,
        result=result,
    )
