"""Events a workflow run emits: what `run()` collects and `run_stream()` yields live.

Events are small slotted dataclasses, cheap to make: a run creates a few per executor
invocation, and a streamed agent one per chunk. A run that nobody watches (`Workflow.run`
without ``include_events=True``) makes none of the executor events at all.

Lifecycle events (`LIFECYCLE_EVENTS`: started, status, superstep, executor invoked,
completed and failed, output, request, failure) are emitted by the runner only; a handler's
`WorkflowContext.add_event` refuses them, so a consumer can trust what they say.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

__all__ = [
    "LIFECYCLE_EVENTS",
    "AgentResponseEvent",
    "AgentUpdateEvent",
    "ExecutorCompletedEvent",
    "ExecutorEvent",
    "ExecutorFailedEvent",
    "ExecutorInvokedEvent",
    "OutputEvent",
    "RequestInfoEvent",
    "RunStatus",
    "StatusEvent",
    "SuperstepCompletedEvent",
    "SuperstepStartedEvent",
    "WarningEvent",
    "WorkflowEvent",
    "WorkflowFailedEvent",
    "WorkflowStartedEvent",
]

RunStatus: TypeAlias = Literal[
    "in_progress", "idle", "idle_with_pending_requests", "failed", "cancelled"
]
"""Where a run stands: working, done (idle), waiting for answers, failed or cancelled."""


@dataclass(slots=True)
class WorkflowEvent:
    """Base of every workflow event."""


@dataclass(slots=True)
class WorkflowStartedEvent(WorkflowEvent):
    """A run started (or resumed from a checkpoint, or continued with answers)."""

    run_id: str
    resumed_from: str | None = None


@dataclass(slots=True)
class StatusEvent(WorkflowEvent):
    """The run's status changed."""

    status: RunStatus


@dataclass(slots=True)
class SuperstepStartedEvent(WorkflowEvent):
    """A superstep began: these executors have messages to take."""

    superstep: int
    executor_ids: list[str] = field(default_factory=list)


@dataclass(slots=True)
class SuperstepCompletedEvent(WorkflowEvent):
    """A superstep ended and its state was committed (and checkpointed, when configured)."""

    superstep: int
    checkpoint_id: str | None = None


@dataclass(slots=True)
class ExecutorEvent(WorkflowEvent):
    """Base of the events about one executor."""

    executor_id: str


@dataclass(slots=True)
class ExecutorInvokedEvent(ExecutorEvent):
    """An executor started handling a message (or an answer to one of its requests).

    `data` is a copy of that message, made before the handler got it: what the handler
    does to its own message does not change what the event says.
    """

    message_type: str = ""
    data: Any = None


@dataclass(slots=True)
class ExecutorCompletedEvent(ExecutorEvent):
    """An executor finished handling a message: what it sent and yielded while doing so."""

    sent: list[Any] = field(default_factory=list)
    yielded: list[Any] = field(default_factory=list)


@dataclass(slots=True)
class ExecutorFailedEvent(ExecutorEvent):
    """An executor's handler raised; the run fails."""

    error: BaseException | None = None


@dataclass(slots=True)
class OutputEvent(ExecutorEvent):
    """An executor yielded a workflow output."""

    data: Any = None


@dataclass(slots=True)
class AgentUpdateEvent(ExecutorEvent):
    """One streamed chunk (an `AgentResponseUpdate`) of an agent inside the workflow."""

    data: Any = None


@dataclass(slots=True)
class AgentResponseEvent(ExecutorEvent):
    """The whole `AgentResponse` of an agent inside the workflow."""

    data: Any = None


@dataclass(slots=True)
class RequestInfoEvent(ExecutorEvent):
    """An executor asked for input; answer it by `request_id`."""

    request_id: str = ""
    data: Any = None
    response_type: Any = None


@dataclass(slots=True)
class WarningEvent(WorkflowEvent):
    """Something looked wrong but the run goes on (e.g. a message no edge could deliver)."""

    message: str
    executor_id: str | None = None


@dataclass(slots=True)
class WorkflowFailedEvent(WorkflowEvent):
    """The run failed; `error` says where and why."""

    error: BaseException
    executor_id: str | None = None


LIFECYCLE_EVENTS: tuple[type[WorkflowEvent], ...] = (
    WorkflowStartedEvent,
    StatusEvent,
    SuperstepStartedEvent,
    SuperstepCompletedEvent,
    ExecutorInvokedEvent,
    ExecutorCompletedEvent,
    ExecutorFailedEvent,
    OutputEvent,
    RequestInfoEvent,
    WorkflowFailedEvent,
)
"""Events only the runner emits (subclasses included); handlers cannot fake them."""
