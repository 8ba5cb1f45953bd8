"""The server's store as each identity sees it: its own keys and logs, no one else's.

`OwnedStore` wraps the store a server was given. Every key and log name is prefixed with
``@<name>/`` for the owner the current work runs as (`cantata.core.current_owner`, set by
the auth middleware for each request, carried into the tasks it starts), and unprefixed
for the anonymous identity. Routes use it as any store, so none of them can forget to
scope what it keeps: a response, an A2A task or context, a dev UI run or chat, a claim on
an answer, a checkpoint are all found only under the identity that wrote them. Names never
hold ``/`` and the anonymous identity's keys never start with ``@`` (no route writes one),
so no two namespaces overlap; the anonymous identity's listing leaves ``@`` keys out.

`owned_key` gives the same prefix to an in-memory key (a waiting run held by context id),
so a client-chosen id names a different thing for each identity in memory too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..core import current_owner
from ..stores import StateStore

__all__ = ["OwnedStore", "owned_key"]


def _prefix() -> str:
    owner = current_owner()
    return "" if owner is None else f"@{owner}/"


def owned_key(key: str) -> str:
    """`key` in the current owner's namespace (itself for the anonymous identity)."""
    return _prefix() + key


class OwnedStore(StateStore):
    """`store` with every key and log in the current owner's namespace (see the module).
    Closing it closes `store`."""

    def __init__(self, store: StateStore) -> None:
        self.inner = store

    async def append(self, log: str, entries: Sequence[Any]) -> int:
        """Append to the owner's log."""
        return await self.inner.append(owned_key(log), entries)

    async def read(self, log: str, start: int = 0, stop: int | None = None) -> list[Any]:
        """Read the owner's log."""
        return await self.inner.read(owned_key(log), start, stop)

    async def length(self, log: str) -> int:
        """The length of the owner's log."""
        return await self.inner.length(owned_key(log))

    async def delete_log(self, log: str) -> None:
        """Remove the owner's log."""
        await self.inner.delete_log(owned_key(log))

    async def get(self, key: str) -> Any | None:
        """The owner's value at `key`."""
        return await self.inner.get(owned_key(key))

    async def put(self, key: str, value: Any) -> None:
        """Set the owner's value."""
        await self.inner.put(owned_key(key), value)

    async def put_many(self, items: Mapping[str, Any]) -> None:
        """Set several of the owner's values atomically."""
        prefix = _prefix()
        await self.inner.put_many({prefix + k: v for k, v in items.items()})

    async def put_if_absent(self, key: str, value: Any) -> bool:
        """Set the owner's value if it holds none."""
        return await self.inner.put_if_absent(owned_key(key), value)

    async def delete(self, key: str) -> None:
        """Remove the owner's value."""
        await self.inner.delete(owned_key(key))

    async def keys(self, prefix: str = "") -> list[str]:
        """The owner's keys that start with `prefix`, without the owner's prefix."""
        own = _prefix()
        found = await self.inner.keys(own + prefix)
        if not own:
            return [k for k in found if not k.startswith("@")]
        return [k[len(own) :] for k in found]

    async def close(self) -> None:
        """Close the wrapped store."""
        await self.inner.close()

    async def __aenter__(self) -> OwnedStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
