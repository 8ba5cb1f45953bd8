"""Claims: one holder for a key across every process on a store, built on `put_if_absent`.

Serving uses them so that of two answers to one waiting request (sent at once to two
processes, or one after the other) only the first goes on. A claim may carry a lease: a
holder that died never finishes, so past the lease another caller takes the claim over. The
takeover is itself a put-if-absent (of a key naming the lease that ran out), so of two
callers that both find one claim expired, one takes it; the other sees a live claim.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from .base import StateStore

__all__ = ["held_claim", "settle_claim", "take_claim"]

_log = logging.getLogger("cantata.stores")
_UNTIL = "until"


async def take_claim(
    store: StateStore, key: str, value: dict[str, Any] | None = None, *, lease: float | None = None
) -> bool:
    """Take the claim `key` for this caller; False when another holds it. The claim holds
    `value` (a JSON object) and, with `lease` seconds, a deadline after which a caller that
    finds it still held takes it over (its holder died). A claim written without a deadline
    (see `settle_claim`) is held for good."""
    held = dict(value or {})
    if lease is not None:
        held[_UNTIL] = time.time() + lease
    if await store.put_if_absent(key, held):
        return True
    if lease is None:
        return False
    current = await store.get(key)
    until = current.get(_UNTIL) if isinstance(current, dict) else None
    if not isinstance(until, int | float) or isinstance(until, bool) or until >= time.time():
        return False
    # one caller takes over this expired claim: the takeover of its deadline is atomic
    if not await store.put_if_absent(f"{key}:after:{until!r}", True):
        return False
    _log.warning("took over the claim %s of a holder that did not finish in time", key)
    await store.put(key, held)
    return True


async def settle_claim(store: StateStore, key: str, value: dict[str, Any]) -> None:
    """Hold the claim `key` for good, holding `value` (the holder finished: no deadline is
    left for another caller to take it over after)."""
    await store.put(key, dict(value))


async def held_claim(store: StateStore, key: str) -> dict[str, Any] | None:
    """What the claim `key` holds (without its deadline), or None when nobody holds it."""
    current = await store.get(key)
    if not isinstance(current, dict):
        return None if current is None else {}
    return {k: v for k, v in current.items() if k != _UNTIL}
