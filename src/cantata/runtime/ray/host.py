"""The Ray actor that holds one agent: `AgentHost`.

Inside, a `LocalRuntime` of one agent gives it the same turns, timeouts, cancellation,
dedup window, store restore and eviction as in one process; what the agent sends to any
other agent goes through a `Router` to that agent's actor. A request carries the ids of
the requests waiting on it (its chain): one that comes back to an agent whose turn waits on
it (A asks B, B asks A) runs within that turn, as `LocalRuntime` does, instead of waiting
for it until the timeout. Messages arrive as JSON
envelopes, are checked for their wire version, and are admitted in per-sender order
(`ReorderBuffer`) before they queue for the agent's turn. They come as Ray method calls or,
from routers that can open one, over the actor's direct stream (`direct.py`), which the
actor opens on its node's IP when first asked for its address.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import time
from collections.abc import Callable
from typing import Any

import ray

from ...core import CancellationToken, loads
from ...stores import StateStore
from ..context import MessageContext, _current
from ..ids import AgentId, TopicId
from ..local import LocalRuntime
from ..protocol import AgentFactory
from ..state import SCHEMA_VERSION
from ..subscriptions import Subscription
from . import wire
from .direct import DirectServer, node_ip
from .reorder import ReorderBuffer
from .router import Router

__all__: list[str] = []

_log = logging.getLogger("cantata.runtime.ray")


class _HostRuntime(LocalRuntime):
    """The one-agent runtime inside an actor; everything not for its agent goes out."""

    def __init__(self, own: AgentId, router: Router, **options: Any) -> None:
        super().__init__(**options)
        self._own = own
        self._router = router
        # The requests in flight here, by message id: their contexts and chains.
        self._held: dict[str, tuple[MessageContext, list[str]]] = {}

    async def send_message(
        self,
        message: Any,
        recipient: AgentId,
        *,
        sender: AgentId | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 (the fixed API)
        cancellation_token: CancellationToken | None = None,
        message_id: str | None = None,
    ) -> Any:
        if recipient == self._own:
            return await super().send_message(
                message,
                recipient,
                sender=sender,
                timeout=timeout,
                cancellation_token=cancellation_token,
                message_id=message_id,
            )
        parent = _current.get()
        chain: list[str] = []
        if parent is not None:
            sender = sender if sender is not None else parent.recipient
            held = self._held.get(parent.message_id)
            chain = [*held[1], parent.message_id] if held is not None else [parent.message_id]
        return await self._router.request(
            message,
            recipient,
            sender=sender,
            parent=parent,
            timeout=self._default_timeout if timeout is None else timeout,
            token=cancellation_token,
            message_id=message_id,
            chain=chain,
        )

    async def publish_message(
        self,
        message: Any,
        topic_id: TopicId,
        *,
        sender: AgentId | None = None,
        message_id: str | None = None,
    ) -> None:
        parent = _current.get()
        if sender is None and parent is not None:
            sender = parent.recipient
        await self._router.publish(
            message, topic_id, sender=sender, parent=parent, message_id=message_id
        )

    async def add_subscription(self, subscription: Subscription) -> None:
        await self._router.add_subscription(subscription)

    async def remove_subscription(self, subscription_id: str) -> None:
        await self._router.remove_subscription(subscription_id)

    async def deliver(
        self, message: Any, env: wire.Envelope, token: CancellationToken, is_rpc: bool
    ) -> Any:
        """Run the agent's handler for `message` in its turn, as `send_message` would."""
        sender, topic = env.get("sender"), env.get("topic")
        chain = [str(m) for m in env.get("chain") or ()] if is_rpc else []
        caller = None  # the turn here that waits on this request, if one does
        for waiting in reversed(chain):
            held = self._held.get(waiting)
            if held is not None:
                caller = held[0]
                break
        ctx = MessageContext(
            message_id=str(env["id"]),
            correlation_id=str(env.get("corr") or env["id"]),
            causation_id=env.get("cause"),
            sender=None if sender is None else AgentId.parse(sender),
            recipient=self._own,
            topic_id=None if topic is None else TopicId.parse(topic),
            timestamp=time.time(),
            cancellation_token=CancellationToken(),
            is_rpc=is_rpc,
            caller=caller,
            trace_context=env.get("tp"),
        )
        timeout = env.get("timeout")
        bound = self._default_timeout if not is_rpc else (math.inf if timeout is None else timeout)
        cell = self._cells.get(self._own)
        if cell is None:
            cell = self._activate(self._own)
        self._pending += 1
        self._held[ctx.message_id] = (ctx, chain)
        try:
            return await self._guarded_call(cell, message, ctx, self._bound(bound), token, None)
        finally:
            self._held.pop(ctx.message_id, None)
            self._done_one()


class AgentHost:
    """One agent's actor (made a Ray actor class by `host_class()`)."""

    def __init__(
        self, agent_id: str, factory: AgentFactory, config: dict[str, Any], directory: Any
    ) -> None:
        self._id = AgentId.parse(agent_id)
        self._name = str(self._id)
        self._factory = factory
        self._config = config
        self._directory = directory
        self._runtime: _HostRuntime | None = None
        self._store: StateStore | None = None
        self._reorder = ReorderBuffer(float(config["reorder_wait"]))
        self._tokens: dict[str, CancellationToken] = {}
        self._inflight = 0
        self._gone = False
        self._last = time.monotonic()
        self._sweeper: asyncio.Task[None] | None = None
        self._direct: DirectServer | None = None
        self._via = {"ray": 0, "direct": 0}  # messages taken by each path (tests, operators)

    async def _rt(self) -> _HostRuntime:
        if self._runtime is None:
            make_store: Callable[[], StateStore] | None = self._config["store"]
            router = Router(
                self._directory,
                interventions=list(self._config["interventions"]),
                stop_grace=float(self._config["stop_grace"]),
                direct=bool(self._config.get("direct", True)),
            )
            self._store = None if make_store is None else make_store()
            runtime = _HostRuntime(
                self._id,
                router,
                store=self._store,
                dedup_window=int(self._config["dedup_window"]),
                default_timeout=self._config["default_timeout"],
                stop_grace=float(self._config["stop_grace"]),
                on_error=self._config["on_error"],
                state_prefix=str(self._config["state_prefix"]),
            )
            factory = self._factory
            runtime._factories[self._id.type] = factory  # no default subscriptions here
            await runtime.start()
            self._runtime = runtime
            evict_after = self._config["evict_after"]
            if evict_after is not None:
                self._sweeper = asyncio.get_running_loop().create_task(self._sweep(evict_after))
        return self._runtime

    async def request(self, env: Any) -> wire.Envelope:
        self._via["ray"] += 1
        return await self._handle(env, is_rpc=True)

    async def event(self, env: Any) -> wire.Envelope:
        self._via["ray"] += 1
        return await self._handle(env, is_rpc=False)

    async def direct_address(self) -> tuple[str, int, str] | None:
        """Where this actor takes messages directly (listening from the first ask on); None
        when the runtime turned the direct path off or no port could be opened."""
        if self._gone or not self._config.get("direct", True):
            return None
        if self._direct is None:
            server = DirectServer(
                self._direct_message, self._direct_cancel, on_lost=self._direct_lost
            )
            try:
                await server.start(node_ip())
            except OSError:
                _log.warning("agent %s: no direct stream (Ray calls only)", self._id, exc_info=True)
                return None
            self._direct = server
        return self._direct.address

    async def _direct_message(self, frame: dict[str, Any]) -> wire.Envelope:
        env = frame.get("env")
        if (
            isinstance(env, dict)
            and env.get("v") == wire.WIRE_VERSION
            and env.get("recipient") != self._name
        ):
            # for an actor that listened on this port before (it ended, and the port was
            # taken again): nothing ran, so the router looks the agent up and sends again
            return wire.GONE
        self._via["direct"] += 1
        return await self._handle(env, is_rpc=frame["t"] == "q")

    def _direct_cancel(self, frame: dict[str, Any]) -> None:
        self.cancel(str(frame.get("id")))

    def _direct_lost(self, frame: dict[str, Any]) -> None:
        """A request whose stream ended before its answer: nobody will read that answer, so
        its handler is cancelled as its caller's cancellation would (it would hold the
        agent's turn, and the caller's next request queue behind it, until its timeout)."""
        env = frame.get("env")
        if isinstance(env, dict) and "id" in env:
            self.cancel(str(env["id"]))

    async def close_direct(self) -> None:
        """Stop taking messages directly (routers fall back to Ray calls)."""
        self._config = {**self._config, "direct": False}
        server, self._direct = self._direct, None
        if server is not None:
            await server.close()

    def paths(self) -> dict[str, int]:
        """How many messages came by Ray call and how many by the direct stream."""
        return dict(self._via)

    async def _handle(self, env: Any, *, is_rpc: bool) -> wire.Envelope:
        if self._gone:
            return wire.GONE
        self._inflight += 1
        mid = ""
        token: CancellationToken | None = None
        try:
            env = wire.check(env, "message")
            mid = str(env["id"])
            token = self._tokens[mid] = CancellationToken()
            runtime = await self._rt()
            await self._reorder.admit(str(env["stream"]), int(env["seq"]))
            message = loads(env["msg"])
            return wire.ok(await runtime.deliver(message, env, token, is_rpc))
        except Exception as exc:
            return wire.failed(exc)
        finally:
            if token is not None and self._tokens.get(mid) is token:
                del self._tokens[mid]  # not a later delivery's of the same id
            self._inflight -= 1
            self._last = time.monotonic()

    def cancel(self, message_id: str) -> None:
        """Cancel the handler of `message_id` (through its token), if still running."""
        token = self._tokens.get(message_id)
        if token is not None:
            token.cancel()

    async def save(self) -> dict[str, Any]:
        """The agent's saved record, taken in its turn."""
        data = await (await self._rt()).save_state()
        return dict(data["agents"])

    async def load(self, record: dict[str, Any]) -> wire.Envelope:
        try:
            data = {"schema_version": SCHEMA_VERSION, "agents": {str(self._id): record}}
            await (await self._rt()).load_state({**data, "subscriptions": []})
            return wire.ok(None)
        except Exception as exc:
            return wire.failed(exc)

    async def evict(self, older_than: float) -> bool:
        """Save the agent to the store and answer "gone" from now on, if idle long enough."""
        if self._gone or self._inflight or time.monotonic() - self._last < older_than:
            return False
        runtime = await self._rt()
        self._gone = True  # set before any await: no message slips in while saving
        try:
            await runtime.close()  # saves the agent to the store, runs its close hook
            await self._close_store()
        except Exception:
            _log.exception("evicting agent %s failed; it stays", self._id)
            self._gone = False
            return False
        return True

    async def shutdown(self) -> None:
        """Close the agent (saving it to the store when there is one); answer "gone"."""
        self._gone = True
        if self._sweeper is not None:
            self._sweeper.cancel()
        if self._runtime is not None:
            await self._runtime.close()
            self._runtime._router.close()
        await self._close_store()
        await self.close_direct()

    async def _close_store(self) -> None:
        store, self._store = self._store, None
        if store is not None:
            await store.close()

    def where(self) -> tuple[str, int]:
        """The node id and process id this actor runs in (for tests and operators)."""
        return ray.get_runtime_context().get_node_id(), os.getpid()

    async def _sweep(self, evict_after: float) -> None:
        while not self._gone:
            await asyncio.sleep(max(evict_after / 2, 0.01))
            with contextlib.suppress(Exception):
                if await self.evict(evict_after):
                    self._directory.retire.remote(str(self._id))


_HOST: Any = None
_DIRECTORY: Any = None


def host_class() -> Any:
    """`AgentHost` as a Ray actor class (made once, on first use)."""
    global _HOST
    if _HOST is None:
        _HOST = ray.remote(AgentHost)
    return _HOST


def directory_class() -> Any:
    """`Directory` as a Ray actor class (made once, on first use)."""
    global _DIRECTORY
    if _DIRECTORY is None:
        from .directory import Directory

        _DIRECTORY = ray.remote(Directory)
    return _DIRECTORY
