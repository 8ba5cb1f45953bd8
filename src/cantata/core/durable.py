"""The effect scope of a durable run: how layers below the workflow journal what they do.

A durable workflow run sets the scope (a context variable) while an executor's handlers
run; the tool loop reads it to journal model answers and effect tools' results, so a
resumed or replayed run gets the same answers instead of asking again. Outside a durable
run there is no scope and nothing is journaled.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any, Protocol

__all__ = ["EffectScope", "current_effects", "effect_scope"]


class EffectScope(Protocol):
    """Journaled results of one executor in one superstep of one run."""

    def next_key(self, key: str) -> str:
        """The idempotency key of the next use of `key` (``key#2`` for the second, ...)."""
        ...

    async def lookup(self, key: str) -> tuple[bool, Any]:
        """``(True, result)`` when the result of `key` was journaled."""
        ...

    async def record(self, key: str, result: Any) -> Any:
        """Journal a result before the run goes on; returns it as a resume will see it."""
        ...


effect_scope: ContextVar[EffectScope | None] = ContextVar("cantata_effect_scope", default=None)


def current_effects() -> EffectScope | None:
    """The effect scope of the durable run this code runs in, or None."""
    return effect_scope.get()
