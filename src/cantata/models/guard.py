"""A switch that makes any real model request fail: unit tests turn it off so an accidental
call to a real model fails loudly instead of passing slowly (or costing money)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from ..core import UsageError

__all__ = [
    "allow_model_requests",
    "check_model_requests_allowed",
    "model_requests_allowed",
    "set_model_requests_allowed",
]

_allowed = True


def model_requests_allowed() -> bool:
    """Whether real model requests are currently allowed."""
    return _allowed


def check_model_requests_allowed(client: str) -> None:
    """Called by every real client before it contacts a model."""
    if not _allowed:
        raise UsageError(
            f"{client} tried to call a real model while real model requests are blocked; "
            "use ScriptedChatClient, or mark the test with a real-model marker"
        )


@contextlib.contextmanager
def allow_model_requests(allowed: bool = True) -> Iterator[None]:
    """Allow (or block) real model requests inside the block."""
    global _allowed
    previous, _allowed = _allowed, allowed
    try:
        yield
    finally:
        _allowed = previous


def set_model_requests_allowed(allowed: bool) -> None:
    """Process-wide switch, for test session set-up."""
    global _allowed
    _allowed = allowed
