"""The one error hierarchy of cantata.

Families by audience:

- `UsageError`: a mistake of the developer using the API (bad configuration, wrong
  thread kind, bad arguments). Fix the code.
- `RunError`: a run failed at run time (model HTTP error, tool failure, timeout,
  undeliverable message). Retry, or handle.
- `SerializationError`: data that cannot be written or read as JSON (unknown type,
  malformed or damaged data, unknown schema version). Nothing was loaded.
- `ToolSignal`: raised by a tool to steer the function-invocation loop; not a failure.

Every message names the identifiers involved and, where there is one, the fix.
"""

from __future__ import annotations

import builtins
from typing import Any

__all__ = [
    "AgentError",
    "ApprovalRequired",
    "CancelledError",
    "CantHandle",
    "CantataError",
    "CheckpointError",
    "ConfigurationError",
    "InvalidMessageError",
    "MessageDropped",
    "ModelError",
    "ModelHTTPError",
    "ModelOutputError",
    "RetryTool",
    "RunError",
    "RuntimeStateError",
    "SchemaVersionError",
    "SerializationError",
    "StoreError",
    "ThreadError",
    "TimeoutError",
    "ToolError",
    "ToolSignal",
    "Undeliverable",
    "UnknownTypeError",
    "UsageError",
    "WorkflowError",
]


class CantataError(Exception):
    """Root of every error cantata raises on purpose."""


# --- mistakes of the developer ------------------------------------------------------


class UsageError(CantataError):
    """The API was used in a way it does not support; the message says how to fix it."""


class ConfigurationError(UsageError):
    """A definition (agent, tool, workflow, spec, client) is invalid."""


class ThreadError(UsageError):
    """A thread was used wrongly: deleted, of the wrong kind for the agent, or unknown."""


class InvalidMessageError(UsageError):
    """A message or content is malformed (bad role, empty name, wrong field types)."""


# --- serialization ----------------------------------------------------------------


class SerializationError(CantataError):
    """Data could not be written to or read from JSON; nothing was loaded."""


class UnknownTypeError(SerializationError):
    """A type is not in the JSON type registry (on write), or a `$type` tag is unknown (on read)."""

    def __init__(self, message: str, *, type_name: str) -> None:
        super().__init__(message)
        self.type_name = type_name


class SchemaVersionError(SerializationError):
    """Persisted data carries a schema version this code does not know."""


class CheckpointError(SerializationError):
    """A checkpoint is missing, damaged or from an unknown schema."""


# --- failures of a run -------------------------------------------------------------


class RunError(CantataError):
    """Something failed while running; the run may be retried or handled."""


class TimeoutError(RunError, builtins.TimeoutError):
    """A wait ran past its timeout; also caught by `except TimeoutError` (the builtin)."""


class CancelledError(RunError):
    """The work was cancelled through a `CancellationToken`."""


class ModelError(RunError):
    """A model client failed to produce a response."""


class ModelHTTPError(ModelError):
    """The model server answered with an HTTP error."""

    def __init__(
        self,
        message: str,
        *,
        status_code: int,
        body: Any = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.body = body
        self.retry_after = retry_after


class ModelOutputError(ModelError):
    """The model answered, but its output does not fit what was asked (schema, tool call JSON)."""


class ToolError(RunError):
    """A tool failed; inside the function loop this becomes an error result for the model."""


class StoreError(RunError):
    """A durable store failed (connection, constraint, corrupted data)."""


class AgentError(RunError):
    """An agent run failed."""


class WorkflowError(RunError):
    """A workflow run failed or was given input it cannot take."""


class RuntimeStateError(UsageError):
    """The actor runtime was used in a state that does not allow it (not started, stopped)."""


class Undeliverable(RunError):
    """No agent can receive a direct message at this `AgentId` (unknown type)."""


class CantHandle(RunError):
    """The recipient has no handler for the message's type."""


class MessageDropped(RunError):
    """An intervention dropped a direct message; the sender gets this instead of a reply."""


# --- signals that tools raise to steer the loop -------------------------------------


class ToolSignal(CantataError):
    """Base of the exceptions a tool raises on purpose to steer the function loop."""


class RetryTool(ToolSignal):
    """Ask the model to call the tool again; `message` is shown to the model."""


class ApprovalRequired(ToolSignal):
    """The tool call must be approved by a person before it runs."""
