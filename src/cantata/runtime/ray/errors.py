"""Errors of the Ray runtime: what a caller gets when the other side is gone or failed."""

from __future__ import annotations

from ...core import RunError

__all__ = ["AgentUnavailable", "RemoteHandlerError"]


class AgentUnavailable(RunError):
    """The host holding an agent died (its process or its node) while it had the message,
    or could not be reached; the handler may or may not have run."""


class RemoteHandlerError(RunError):
    """A handler in another process raised an exception this process cannot rebuild (not
    a cantata error nor a builtin); `remote_type` names it."""

    remote_type: str = ""
