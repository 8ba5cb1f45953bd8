"""`WorkflowRunResult`: what one call that drives a run produced.

Beside `Workflow` and below `WorkflowRun`, which makes it, so that the run, its event
stream and the agent view import it without importing the workflow that starts runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..core import WorkflowError
from .events import RequestInfoEvent, RunStatus, WorkflowEvent

if TYPE_CHECKING:
    from .run import WorkflowRun
    from .stream import WorkflowEventStream

__all__ = ["WorkflowRunResult"]


@dataclass(slots=True)
class WorkflowRunResult:
    """What a run (or one continuation of it) produced.

    A result keeps what it needs (outputs, status, pending requests; a failure is raised);
    the full list of events only when the call was made with ``include_events=True``, so a
    run nobody watches does not pay for them.
    """

    run: WorkflowRun
    status: RunStatus
    outputs: list[Any]
    """Every output of the run so far (a resumed run includes those before its checkpoint)."""
    checkpoint_id: str | None = None
    """The last checkpoint of the run, when a checkpoint store is configured."""
    collected: list[WorkflowEvent] | None = field(default=None, repr=False)
    """The call's events, when asked for; read them as `events`."""

    @property
    def events(self) -> list[WorkflowEvent]:
        """The events of this call (needs ``include_events=True`` on the call)."""
        if self.collected is None:
            raise WorkflowError(
                f"run {self.run.run_id!r} kept no events: pass include_events=True to the call "
                "(run, resume, send_responses, continue_run), or iterate run_stream(...)"
            )
        return self.collected

    @property
    def run_id(self) -> str:
        """The run's id."""
        return self.run.run_id

    @property
    def pending_requests(self) -> list[RequestInfoEvent]:
        """Requests for input waiting for an answer (answer with `send_responses`)."""
        return self.run.pending_requests

    async def send_responses(
        self, responses: Mapping[str, Any], *, include_events: bool = False
    ) -> WorkflowRunResult:
        """Answer pending requests by id and continue the run (see `WorkflowRun`)."""
        return await self.run.send_responses(responses, include_events=include_events)

    def send_responses_stream(self, responses: Mapping[str, Any]) -> WorkflowEventStream:
        """Answer pending requests and stream the continuation's events."""
        return self.run.send_responses_stream(responses)
