"""The one error hierarchy of cantata.

Families by audience:

- `UsageError`: a mistake of the developer using the API (bad configuration, wrong
  thread kind, bad arguments). Fix the code.
- `RunError`: a run failed at run time (model HTTP error, tool failure, timeout,
  undeliverable message). Retry, or handle.
- `SerializationError`: data that cannot be written or read as JSON (unknown type,
  malformed or damaged data, unknown schema version). Nothing was loaded.
- `ToolSignal`: raised by a tool to steer the function-invocation loop; not a failure.

Every message names the identifiers involved and, where there is one, the fix; the
identifiers can also be given as keyword fields, kept as attributes (``err.executor_id``)
and together in ``err.fields``, so code can react without parsing the message.

Where a builtin exception means the same thing, the error is also one of those, so
``except ValueError`` written for plain Python keeps working: a mistake of the developer
and unreadable data are `ValueError`s (as an invalid argument or ``json.loads`` would be),
a type that cannot be serialized and a message no handler takes are `TypeError`s, an
unknown recipient is a `LookupError`, a wait past its timeout is a `TimeoutError`, and
the runtime used in the wrong state is also a `RuntimeError`; a model answer that does
not fit its schema is a `ValueError` too. ``str(err)`` is always the message.
"""

from __future__ import annotations

import builtins
from typing import Any

__all__ = [
    "AgentError",
    "AlreadyAnsweredError",
    "ApprovalRequired",
    "CancelledError",
    "CantHandle",
    "CantataError",
    "CheckpointError",
    "ConfigurationError",
    "ContextLengthError",
    "GuardrailTripwire",
    "InvalidMessageError",
    "MessageDropped",
    "ModelConnectionError",
    "ModelError",
    "ModelHTTPError",
    "ModelOutputError",
    "RetryTool",
    "RunError",
    "RunStopped",
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
    "UsageLimitExceeded",
    "WorkflowError",
]


class CantataError(Exception):
    """Root of every error cantata raises on purpose.

    Keyword fields name what the error is about (ids, types); each is kept as an attribute
    and all of them in `fields`. Names the exception itself uses (``args``, methods,
    properties) are refused; a subclass may declare its fields with plain defaults.
    """

    fields: dict[str, Any]

    def __init__(self, *args: object, **fields: Any) -> None:
        super().__init__(*args)
        clash = sorted(n for n in fields if _taken(type(self), n))
        if clash:
            raise builtins.TypeError(
                f"{type(self).__name__} cannot take the field(s) {clash}: the exception "
                "already has attributes of those names; rename them"
            )
        self.fields = fields
        for name, value in fields.items():
            setattr(self, name, value)

    def __reduce__(self) -> tuple[Any, ...]:
        # The default calls ``cls(*args)``, which fails for keyword-only fields; a copy or
        # a process pool (Ray) carrying an error back needs the error whole.
        return (_restore, (type(self), self.args), self.__dict__)


def _taken(cls: type, name: str) -> bool:
    """A name the exception itself uses: a field there would hide or break it.

    Plain class defaults (``executor_id: str | None = None``) may be given as fields.
    """
    if name == "fields" or hasattr(BaseException, name):
        return True
    attr = getattr(cls, name, None)
    return callable(attr) or hasattr(attr, "__get__")


def _restore(cls: type[CantataError], args: tuple[Any, ...]) -> CantataError:
    err = cls.__new__(cls, *args)
    err.args = args
    return err


# --- mistakes of the developer ------------------------------------------------------


class UsageError(CantataError, ValueError):
    """The API was used in a way it does not support; the message says how to fix it."""


class ConfigurationError(UsageError):
    """A definition (agent, tool, workflow, spec, client) is invalid."""


class ThreadError(UsageError):
    """A thread was used wrongly: deleted, of the wrong kind for the agent, or unknown."""


class InvalidMessageError(UsageError):
    """A message or content is malformed (bad role, empty name, wrong field types)."""


# --- serialization ----------------------------------------------------------------


class SerializationError(CantataError, ValueError):
    """Data could not be written to or read from JSON; nothing was loaded.

    A `ValueError`, as the errors of ``json.loads`` are.
    """


class UnknownTypeError(SerializationError, builtins.TypeError):
    """A type is not in the JSON type registry (on write), or a `$type` tag is unknown (on read).

    Also a `TypeError`, as ``json.dumps`` raises for a value it cannot serialize.
    """

    type_name: str

    def __init__(self, message: str, *, type_name: str, **fields: Any) -> None:
        super().__init__(message, type_name=type_name, **fields)


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


class ContextLengthError(ModelError, ValueError):
    """The prompt is longer than the model's context: the caller's to shorten (a server
    answers it with 400 ``context_length_exceeded``)."""


class ModelConnectionError(ModelError, ConnectionError):
    """The model server could not be reached, or dropped the connection: worth another try
    (a `ConnectionError`, so retry policies count it as retryable)."""


class ModelHTTPError(ModelError):
    """The model server answered with an HTTP error."""

    status_code: int
    body: Any
    retry_after: float | None

    def __init__(
        self,
        message: str,
        *,
        status_code: int,
        body: Any = None,
        retry_after: float | None = None,
        **fields: Any,
    ) -> None:
        super().__init__(
            message, status_code=status_code, body=body, retry_after=retry_after, **fields
        )


class ModelOutputError(ModelError, ValueError):
    """The model answered, but its output does not fit what was asked (schema, tool call JSON).

    Also a `ValueError`, as a failed validation of the same text would be.
    """


class ToolError(RunError):
    """A tool failed; inside the function loop this becomes an error result for the model."""


class StoreError(RunError):
    """A durable store failed (connection, constraint, corrupted data)."""


class AgentError(RunError):
    """An agent run failed."""


class WorkflowError(RunError):
    """A workflow run failed or was given input it cannot take."""


class RunStopped(RunError):
    """A check ended the run on purpose (a guardrail's tripwire, a usage limit). Unlike a
    tool's failure it is never a result the model reads: it reaches the caller, and nothing
    of the run after the check happens."""


class GuardrailTripwire(RunStopped):
    """A guardrail refused what it checked: `guardrail` names it, `reason` says why, `stage`
    says where (``input``, ``output``, ``tool_arguments``, ``tool_result``, ``turn``,
    ``executor_input``, ``executor_output``). Served, it is HTTP 400 with the code
    ``guardrail_tripwire:<guardrail>``."""

    guardrail: str
    reason: str
    stage: str

    def __init__(
        self,
        message: str,
        *,
        guardrail: str = "",
        reason: str = "",
        stage: str = "",
        **fields: Any,
    ):
        super().__init__(message, guardrail=guardrail, reason=reason, stage=stage, **fields)


class UsageLimitExceeded(RunStopped):
    """A run reached one of its usage limits before its next model call: `limit` names it
    (``total_tokens``, ``model_calls``, ``cost``...), `used` is what was spent, `allowed`
    the limit, `scope` ``run`` or ``thread`` (or ``identity`` when served). Served, it is
    HTTP 429 with the code ``usage_limit_exceeded:<limit>``."""

    limit: str
    used: float
    allowed: float
    scope: str

    def __init__(
        self,
        message: str,
        *,
        limit: str = "",
        used: float = 0,
        allowed: float = 0,
        scope: str = "run",
        **fields: Any,
    ):
        super().__init__(message, limit=limit, used=used, allowed=allowed, scope=scope, **fields)


class AlreadyAnsweredError(RunError):
    """A waiting session (a team's, a workflow's) was answered by another request first:
    two answers to one wait never both go on. Served, it is HTTP 409."""


class RuntimeStateError(UsageError, builtins.RuntimeError):
    """The actor runtime was used in a state that does not allow it (not started, stopped).

    Also a `RuntimeError`, as using a closed event loop is.
    """


class Undeliverable(RunError, LookupError):
    """No agent can receive a direct message at this `AgentId` (unknown type); a `LookupError`."""


class CantHandle(RunError, builtins.TypeError):
    """The recipient has no handler for the message's type; a `TypeError`."""


class MessageDropped(RunError):
    """An intervention dropped a direct message; the sender gets this instead of a reply."""


# --- signals that tools raise to steer the loop -------------------------------------


class ToolSignal(CantataError):
    """Base of the exceptions a tool raises on purpose to steer the function loop."""


class RetryTool(ToolSignal):
    """Ask the model to call the tool again; `message` is shown to the model."""


class ApprovalRequired(ToolSignal):
    """The tool call must be approved by a person before it runs."""
