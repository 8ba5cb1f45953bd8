"""The local subscribers' actor: one per runtime name on a cluster, off the agents' path.

Agents are placed by hashing and reached straight from each router (see membership.py and
router.py); this actor only serves local subscribers (callbacks in a driver, which hosts
no agent and takes no connection): their events, and direct requests to them with a
future for the answer, wait here in an inbox per process (its router's origin) until that
process takes them (`take`, a bounded long poll) and acknowledges them with its next poll:
a poll's reply lost with its stream, or its Ray call, is handed out again (see _inbox.py).
A poll or local request whose stream ends before its answer is ended (the server's
`on_lost`). A publication passes here only when it has local subscribers.
"""

from __future__ import annotations

import asyncio
import builtins
import logging
from typing import Any

from ...core import TimeoutError, Undeliverable
from ..protocol import LOCAL_TYPE
from . import wire
from ._inbox import Inbox
from .direct import Address, DirectServer, node_ip

__all__: list[str] = []

_log = logging.getLogger("cantata.runtime.ray")
_LOCAL_PREFIX = LOCAL_TYPE + "/"
_WAITING = "_task"  # a direct frame's key for the task answering it (not sent on)


class Directory:
    """Local subscribers' inboxes (see the module)."""

    def __init__(self, name: str, config: dict[str, Any]) -> None:
        self._name = name
        self._config = config
        self._locals: dict[str, str] = {}  # local subscriber key -> its process's origin
        self._inboxes: dict[str, Inbox] = {}
        self._closed_end = 0
        self._asks: dict[str, tuple[str, asyncio.Future[wire.Envelope]]] = {}
        self._server: DirectServer | None = None

    def publish(self, env: Any) -> wire.Envelope:
        """Queue an event for each local subscriber it names; answers at once."""
        try:
            env = wire.check(env, "event")
            for agent_id in env.get("recipients") or ():
                self._to_local(str(agent_id), {"event": {**env, "recipient": agent_id}})
            return wire.ok(None)
        except Exception as exc:
            return wire.failed(exc)

    # -- the directory's own stream --------------------------------------------------------

    async def direct_address(self) -> Address | None:
        """Where routers hand this directory publications and local requests (listening
        from the first ask on); None when the runtime turned the direct path off."""
        if not self._config.get("direct", True):
            return None
        if self._server is None:
            server = DirectServer(
                self._direct_message,
                self._direct_answer,
                answers=frozenset("qep"),
                notes=frozenset("a"),
                on_lost=self._direct_lost,
            )
            try:
                await server.start(node_ip())
            except OSError:
                _log.warning("directory %s: no direct stream", self._name, exc_info=True)
                return None
            self._server = server
        return self._server.address

    async def _direct_message(self, frame: dict[str, Any]) -> Any:
        kind, wait = frame["t"], frame.get("w")
        if kind == "e":
            return self.publish(frame.get("env"))
        if kind == "p":
            frame[_WAITING] = asyncio.current_task()  # for _direct_lost
            ack = int(frame.get("k") or 0)
            return await self.take(str(frame.get("origin")), ack, float(wait or 0.0))
        frame[_WAITING] = asyncio.current_task()
        return await self.ask(frame.get("env"), None if wait is None else float(wait))

    def _direct_lost(self, frame: dict[str, Any]) -> None:
        """A poll or local request whose stream ended before its answer: nobody reads that
        answer, so its wait ends here (a poll would otherwise sit on its inbox's wake-up;
        what it would have handed out stays in the inbox, unacknowledged)."""
        task = frame.get(_WAITING)
        if isinstance(task, asyncio.Task):
            task.cancel()

    def _direct_answer(self, frame: dict[str, Any]) -> None:
        reply = frame.get("reply")
        if isinstance(reply, dict):
            self.answer(str(frame.get("id")), reply)

    # -- local subscribers --------------------------------------------------------------

    def open_local(self, origin: str, key: str) -> None:
        """Route what is sent to local subscriber `key` to the inbox of process `origin`."""
        self._locals[key] = origin
        self._inbox(origin)

    def _inbox(self, origin: str) -> Inbox:
        box = self._inboxes.get(origin)
        if box is None:
            box = self._inboxes[origin] = Inbox(self._closed_end)
        return box

    def close_local(self, key: str) -> None:
        """Forget local subscriber `key`; what is sent to it from now on is refused, and
        requests still waiting for it are answered with an error."""
        self._locals.pop(key, None)
        for mid, (recipient, future) in list(self._asks.items()):
            if recipient == _LOCAL_PREFIX + key and not future.done():
                gone = Undeliverable(
                    f"local subscriber {recipient} was removed before it answered {mid}"
                )
                future.set_result(wire.failed(gone))

    def close_inbox(self, origin: str) -> None:
        """Forget a process's inbox and its subscribers (it is closing)."""
        for key in [k for k, o in self._locals.items() if o == origin]:
            self.close_local(key)
        box = self._inboxes.pop(origin, None)
        if box is not None:
            self._closed_end = max(self._closed_end, box.end)
            if box.wake is not None:
                box.wake.set()

    def _to_local(self, agent_id: str, item: dict[str, Any]) -> bool:
        origin = self._locals.get(agent_id[len(_LOCAL_PREFIX) :])
        box = None if origin is None else self._inboxes.get(origin)
        if box is None:
            return False
        box.put(item)
        return True

    async def take(self, origin: str, ack: int, wait: float) -> list[Any]:
        """What waits for process `origin`'s local subscribers and it has not acknowledged
        (`ack`: the number it expects next), as ``[first number, *items]``; waits up to
        `wait` seconds for something when nothing does (see _inbox.py)."""
        return await self._inbox(origin).take(ack, wait)

    async def ask(self, env: Any, wait: float | None) -> wire.Envelope:
        """A direct request to a local subscriber: queued in its process's inbox; the
        answer comes back through `answer` (within `wait` seconds, else a typed error)."""
        try:
            env = wire.check(env, "request")
            recipient, mid = str(env["recipient"]), str(env["id"])
            future = asyncio.get_running_loop().create_future()
            self._asks[mid] = (recipient, future)
            try:
                if not self._to_local(recipient, {"ask": env}):
                    raise Undeliverable(
                        f"no local subscriber {recipient} (its process removed it or closed)"
                    )
                try:
                    reply: wire.Envelope = await asyncio.wait_for(future, wait)
                except builtins.TimeoutError:
                    raise TimeoutError(
                        f"local subscriber {recipient} did not answer {mid} within {wait}s "
                        "(its process is gone or busy)"
                    ) from None
                return reply
            finally:
                self._asks.pop(mid, None)
        except Exception as exc:
            return wire.failed(exc)

    def answer(self, mid: str, reply: wire.Envelope) -> None:
        """The answer of a local subscriber to request `mid`."""
        found = self._asks.get(mid)
        if found is not None and not found[1].done():
            found[1].set_result(reply)

    async def shutdown(self) -> None:
        """Stop serving (the runtime is closing)."""
        for key in list(self._locals):
            self.close_local(key)
        if self._server is not None:
            await self._server.close()
