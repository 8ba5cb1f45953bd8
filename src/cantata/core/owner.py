"""Whose work this is: the owner a server sets while it runs a request of one client.

`cantata serve` sets the owner (a context variable) to the identity of the client whose
request runs, so what layers below the server keep on that client's behalf is kept apart
from every other client's without each of them being told: a memory's scope is
namespaced by it (`cantata.agents.Memory`), and the server's store view prefixes its keys
with it. Outside a server, or for the server's one anonymous identity, there is no owner
and nothing is prefixed. Tasks started while it is set carry it (asyncio copies context
variables into them).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

__all__ = ["current_owner", "owned_by"]

_owner: ContextVar[str | None] = ContextVar("cantata_owner", default=None)


def current_owner() -> str | None:
    """The name of the identity this code runs for, or None (no server, or anonymous)."""
    return _owner.get()


@contextmanager
def owned_by(name: str | None) -> Iterator[None]:
    """Run the body for the identity `name` (None: for nobody in particular)."""
    token = _owner.set(name)
    try:
        yield
    finally:
        _owner.reset(token)
