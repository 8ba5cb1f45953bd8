"""Identifiers: random, URL-safe, cheap to make."""

from __future__ import annotations

import os
import threading

__all__ = ["new_id"]

_BATCH = 256
"""Ids drawn from the operating system at once: one system call per batch, not per id
(every message, response and run takes one; the call cost more than the rest of making
an id)."""


class _Pool(threading.local):
    """This thread's unused random hex digits (one pool per thread: no lock, no id twice)."""

    def __init__(self) -> None:
        self.hex = ""
        self.at = 0


_pool = _Pool()


def _forget() -> None:
    """In a forked child: drop the parent's unused digits, or both would use them."""
    global _pool
    _pool = _Pool()


os.register_at_fork(after_in_child=_forget)


def new_id() -> str:
    """A fresh random 128-bit id as 32 hex characters (the shape of a uuid4 hex), from the
    operating system's random source, like ``os.urandom(16).hex()``."""
    pool = _pool
    at = pool.at
    text = pool.hex
    if at == len(text):
        text = pool.hex = os.urandom(16 * _BATCH).hex()
        at = 0
    pool.at = at + 32
    return text[at : at + 32]
