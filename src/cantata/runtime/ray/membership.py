"""Where an agent lives: rendezvous hashing over a versioned list of hosts.

The pool of a `RayRuntime` is a fixed number of host actors per node (see host.py). The
list of their names, with a version number, is the membership: a small JSON record in the
cluster's key-value store (Ray's GCS, which every process of the cluster already talks to),
written by the runtime that owns the pool when a node joins or leaves, and read by every
router when it starts, when a host refuses a message as no longer its own, and when a
host is lost. Nothing reads it per message, and no actor holds it: a request goes from the
caller straight to the host the hash gives, and the membership is on no one's hot path.

An agent's host is the host with the highest hash of (agent id, host name): rendezvous
(HRW) hashing, so when a host is added or removed only the agents whose highest score
moves change host (about 1/n of them), with no table to keep. Hashing is blake2b, the
same in every process (Python's own `hash` is salted per process).

The factories and subscriptions live beside it in the same store (the config record), so
a host that Ray restarts after its process died, or one added on a new node, reads them
at start.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ...core import ConfigurationError

__all__: list[str] = []


def _score(agent: str, host: str) -> int:
    digest = hashlib.blake2b(f"{agent}\x00{host}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


_CONFIG_KEPT = 16  # config versions kept behind the newest (readers with a stale head)
_CONFIG_ATTEMPTS = 1000  # writes of one change lost to other writers before giving up
_OWNERS_KEPT = 1 << 16  # owners remembered per membership version (then forgotten at once)


@dataclass(frozen=True, slots=True)
class Membership:
    """A version of the pool: its hosts' actor names (each ``<pool>/<node id>/<n>``)."""

    version: int
    hosts: tuple[str, ...]
    # The owners computed under this version, so an agent's hashes over all hosts are
    # computed once per version, not per message; bounded (cleared when full).
    _owners: dict[str, str] = field(default_factory=dict, compare=False, repr=False)

    def owner(self, agent: str) -> str:
        """The host of agent `agent` (its id as text) under this membership."""
        found = self._owners.get(agent)
        if found is not None:
            return found
        if not self.hosts:
            from .errors import AgentUnavailable

            raise AgentUnavailable(
                f"no host can take agent {agent}: the pool has no live node (membership "
                f"version {self.version})",
                agent_id=agent,
            )
        best, top = self.hosts[0], -1
        for host in self.hosts:
            score = _score(agent, host)
            if score > top:
                best, top = host, score
        if len(self._owners) >= _OWNERS_KEPT:
            self._owners.clear()
        self._owners[agent] = best
        return best

    def to_bytes(self) -> bytes:
        return json.dumps({"version": self.version, "hosts": list(self.hosts)}).encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> Membership:
        raw: Any = json.loads(data)
        return cls(int(raw["version"]), tuple(str(h) for h in raw["hosts"]))


def node_of(host: str) -> str:
    """The Ray node id in a host's name."""
    return host.split("/")[-2]


class Records:
    """The pool's records in the cluster's key-value store (see the module docstring)."""

    def __init__(self, pool: str, namespace: str) -> None:
        self._pool = pool
        self._ns = f"cantata:{namespace}"

    def _key(self, what: str) -> str:
        return f"{self._pool}:{what}"

    def _get(self, what: str) -> bytes | None:
        from ray.experimental import internal_kv

        found = internal_kv._internal_kv_get(self._key(what), namespace=self._ns)
        return None if found is None else bytes(found)

    def _put(self, what: str, value: bytes, *, overwrite: bool = True) -> bool:
        from ray.experimental import internal_kv

        return bool(
            internal_kv._internal_kv_put(
                self._key(what), value, overwrite=overwrite, namespace=self._ns
            )
        )

    def _delete(self, what: str) -> None:
        from ray.experimental import internal_kv

        internal_kv._internal_kv_del(self._key(what), namespace=self._ns)

    def membership(self) -> Membership | None:
        data = self._get("membership")
        return None if data is None else Membership.from_bytes(data)

    def write_membership(self, membership: Membership) -> None:
        self._put("membership", membership.to_bytes())

    def claim(self, owner: str) -> str:
        """Make `owner` the pool's keeper unless one is recorded; the keeper's name."""
        self._put("keeper", owner.encode(), overwrite=False)
        found = self._get("keeper")
        return owner if found is None else found.decode()

    def config(self) -> dict[str, Any]:
        """Factories (by agent type) and subscriptions (as JSON data), as last written."""
        from ray import cloudpickle

        _, data = self._latest_config()
        if data is None:
            return {"factories": {}, "subscriptions": {}}
        loaded: dict[str, Any] = cloudpickle.loads(data)
        return loaded

    def _latest_config(self) -> tuple[int, bytes | None]:
        """The newest config version and its bytes (0 and None before the first).

        Versions are written once each (put-if-absent), so the newest is the last of an
        unbroken run of keys; the head key only says where to start looking (a writer
        that lost a race may set it lower than the newest, never past it)."""
        head = self._get("config-head")
        n = int(head) if head is not None else 0
        data = self._get(f"config:{n}") if n else None
        if n and data is None:  # pruned under a stale head: the newer ones are above it
            for _ in range(_CONFIG_KEPT + 1):
                n += 1
                data = self._get(f"config:{n}")
                if data is not None:
                    break
            else:
                return 0, None
        while True:
            newer = self._get(f"config:{n + 1}")
            if newer is None:
                return n, data
            n, data = n + 1, newer

    def update_config(self, change: Callable[[dict[str, Any]], None]) -> int:
        """Apply `change` to the config as a new version; the version written.

        Two writers (runtimes joined to one pool, or the tasks of one) may change it at
        once: each writes version n + 1 only if nobody has, and one that finds it taken
        reads the newer config and applies its change again, so no change is lost."""
        from ray import cloudpickle

        for _ in range(_CONFIG_ATTEMPTS):
            n, data = self._latest_config()
            config: dict[str, Any] = (
                {"factories": {}, "subscriptions": {}} if data is None else cloudpickle.loads(data)
            )
            change(config)
            blob = cloudpickle.dumps(config)  # type: ignore[no-untyped-call]
            if self._put(f"config:{n + 1}", blob, overwrite=False):
                continue  # taken by another writer: read theirs, apply ours again
            self._put("config-head", str(n + 1).encode())
            if n + 1 > _CONFIG_KEPT:
                self._delete(f"config:{n + 1 - _CONFIG_KEPT}")
            return n + 1
        raise ConfigurationError(
            f"pool {self._pool!r}: the config record kept changing under this writer "
            f"({_CONFIG_ATTEMPTS} attempts)"
        )

    def write_config(self, config: dict[str, Any]) -> None:
        """Replace the config with `config` (a new version, as `update_config`)."""

        def replace(old: dict[str, Any]) -> None:
            old.clear()
            old.update(config)

        self.update_config(replace)

    def clear(self) -> None:
        from ray.experimental import internal_kv

        for what in ("membership", "keeper", "config-head"):
            self._delete(what)
        internal_kv._internal_kv_del(self._key("config:"), del_by_prefix=True, namespace=self._ns)
