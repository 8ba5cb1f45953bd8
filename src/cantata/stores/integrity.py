"""Integrity checks for stored values: detect damage that still parses as JSON.

A store refuses text that is not JSON, but a flipped digit or a changed string inside a
checkpoint still parses, and a run resumed from it would silently differ. A sealed value
carries the SHA-256 of its canonical JSON text (keys sorted, ASCII, no spaces), computed
when it is written and checked when it is read back, on any backend.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from ..core import StoreError
from ._codec import check_json
from .errors import StoreCorruptionError

__all__ = ["checksum", "seal", "unseal"]

_canonical = json.JSONEncoder(
    ensure_ascii=True, allow_nan=False, separators=(",", ":"), sort_keys=True
).encode
_FIELDS = frozenset({"sha256", "value"})


def checksum(value: Any) -> str:
    """The SHA-256 (hex) of `value`'s canonical JSON text; equal data, equal checksum.

    The value must be JSON data as the stores take it (`StoreError` otherwise); dict key
    order does not count, everything else does (``1`` and ``1.0`` differ).
    """
    check_json(value, store="checksum", where="a value")
    return hashlib.sha256(_canonical(value).encode("ascii")).hexdigest()


def seal(value: Any) -> dict[str, Any]:
    """``{"sha256": ..., "value": value}``: store this instead of `value` (one level more)."""
    return {"sha256": checksum(value), "value": value}


def unseal(data: Any, *, where: str) -> Any:
    """The value inside a `seal`, after checking it; damage is a `StoreCorruptionError`.

    `where` names the record in the message (for example ``"checkpoint c1 of run r1"``).
    """
    if type(data) is not dict or data.keys() != _FIELDS or type(data["sha256"]) is not str:
        raise StoreCorruptionError(
            f"{where} is not a sealed record (expected an object with exactly 'sha256' and "
            "'value'); it was damaged or written by something else: restore it or discard it"
        )
    try:
        actual = checksum(data["value"])
    except StoreError as exc:  # a value no store could have written
        raise StoreCorruptionError(f"{where} holds a value that is not JSON data") from exc
    if actual != data["sha256"]:
        raise StoreCorruptionError(
            f"{where} fails its integrity check (its SHA-256 does not match the one sealed "
            "with it): it was changed after it was written; restore it from a backup or "
            "discard it"
        )
    return data["value"]
