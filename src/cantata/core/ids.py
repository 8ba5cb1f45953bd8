"""Identifiers: random, URL-safe, cheap to make."""

from __future__ import annotations

import os

__all__ = ["new_id"]


def new_id() -> str:
    """A fresh random 128-bit id as 32 hex characters (the shape of a uuid4 hex)."""
    return os.urandom(16).hex()
