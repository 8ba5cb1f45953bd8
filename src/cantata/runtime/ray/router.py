"""How one process (the driver, or an agent's actor) reaches agents on the cluster.

It keeps a cache of actor handles, numbers messages per sender and recipient, runs the
process's interventions, bounds every wait, and turns the ways Ray reports a dead actor
into cantata errors:

- a request whose actor was evicted (it answered "gone", or died by the runtime's own
  hand before the message ran) is sent again to the re-created actor: nothing ran;
- a request whose actor died otherwise (worker process or node lost) raises
  `AgentUnavailable`: the handler may have run, so it is not repeated (at most once).
  So does a request sent through a cached handle to an actor that had already died (Ray
  reports both alike); the next request finds the agent's new actor.

Requests go over the agent's actor's direct stream when it reported one and this process
could open it (see direct.py), else as Ray method calls; the semantics are the same. A
stream that ends while a request is in flight counts as the actor's death once Ray confirms
it (a bounded call to the actor fails): evicted -> sent again, else `AgentUnavailable`; an
actor that still answers was unreachable, which is `AgentUnavailable` too (at most once).
A stream that cannot be opened, or an envelope too big for a frame, takes the Ray call.

A request to a local subscriber (an address of type `LOCAL_TYPE`: a callback in some
process, see `AgentRuntime.add_local_subscriber`) goes through the directory, which queues
it for that process and hands back its answer.
"""

from __future__ import annotations

import asyncio
import builtins
import math
import time
from collections.abc import Callable
from typing import Any

from ray.exceptions import ActorDiedError, RayActorError

from ...core import (
    CancellationToken,
    CancelledError,
    MessageDropped,
    TimeoutError,
    dumps,
    new_id,
    to_json,
    tracing,
)
from ..context import MessageContext, _start_send
from ..ids import AgentId, TopicId
from ..interventions import DROP, InterventionHandler
from ..protocol import LOCAL_TYPE
from ..subscriptions import Subscription
from . import wire
from ._inbox import Taken
from .direct import DIRECT_LIMIT, Address, DirectClient, Lost, Refused, address_of, died
from .errors import AgentUnavailable

__all__: list[str] = []

_RETRY_PAUSE = 0.02  # between tries to reach an actor that is being evicted
_UNKNOWN = object()  # the directory's address, before it is asked
_CONFIRM_WAIT = 60.0  # seconds at most for Ray to say whether an actor whose stream broke died


def _remaining(deadline: float | None) -> float | None:
    return None if deadline is None else max(deadline - time.monotonic(), 0.0)


class Router:
    """Sends requests and events from this process; see the module docstring."""

    def __init__(
        self,
        directory: Any,
        *,
        interventions: list[InterventionHandler],
        stop_grace: float,
        origin: str | None = None,
        direct: bool = True,
    ) -> None:
        self._directory = directory
        self._interventions = interventions
        self._grace = stop_grace
        self._origin = origin or new_id()
        self._handles: dict[AgentId, Any] = {}
        self._seq: dict[AgentId, dict[str, int]] = {}
        self._lookups: dict[AgentId, asyncio.Future[Any]] = {}
        self._use_direct = direct
        self._direct = DirectClient()
        self._addresses: dict[AgentId, Address | None] = {}
        self._directory_address: Address | object | None = _UNKNOWN
        self._taken = Taken()  # what this process's local subscribers were handed
        self.pending = 0  # requests and publications from here not yet answered

    @property
    def origin(self) -> str:
        """This process's name for the directory (its local subscribers' inbox)."""
        return self._origin

    def forget(self, agent_id: AgentId) -> None:
        self._handles.pop(agent_id, None)
        self._addresses.pop(agent_id, None)

    def close(self) -> None:
        """End the direct streams from here (requests still on them see them lost)."""
        self._direct.close()

    async def handle_for(self, agent_id: AgentId, deadline: float | None) -> Any:
        """The actor handle of `agent_id`; one lookup at a time per agent, so callers go on
        (and number their messages) in the order they asked."""
        handle = self._handles.get(agent_id)
        if handle is not None:
            return handle
        lookup = self._lookups.get(agent_id)
        if lookup is None:
            lookup = self._lookups[agent_id] = asyncio.ensure_future(self._lookup(agent_id))
            lookup.add_done_callback(lambda _: self._lookups.pop(agent_id, None))
        return await asyncio.wait_for(asyncio.shield(lookup), _remaining(deadline))

    async def _lookup(self, agent_id: AgentId) -> Any:
        try:
            reply = await _wait(self._directory.ensure.remote(str(agent_id)))
        except RayActorError as exc:
            raise AgentUnavailable(
                f"the runtime's directory actor is gone (looking up {agent_id}): {exc}",
                agent_id=str(agent_id),
            ) from None
        if isinstance(reply, dict):
            wire.result(reply, f"activating agent {agent_id}")
        handle = reply[0]
        self._addresses[agent_id] = (
            await address_of(handle, self._grace + 30.0) if self._use_direct else None
        )
        self._handles[agent_id] = handle
        self._seq[agent_id] = {}  # a new actor: its sequences start again at 0
        return handle

    def number(self, env: wire.Envelope, recipient: AgentId) -> None:
        """Give `env` the next number of its stream to `recipient`'s current actor."""
        streams = self._seq.setdefault(recipient, {})
        seq = streams.get(env["stream"], 0)
        streams[env["stream"]] = seq + 1
        env["seq"] = seq

    def envelope(
        self,
        message: Any,
        *,
        mid: str,
        parent: MessageContext | None,
        sender: AgentId | None,
        recipient: AgentId | None,
        topic: TopicId | None,
        timeout: float | None,
        chain: list[str] | None = None,
    ) -> wire.Envelope:
        return {
            "v": wire.WIRE_VERSION,
            "id": mid,
            "corr": mid if parent is None else parent.correlation_id,
            "cause": None if parent is None else parent.message_id,
            "sender": None if sender is None else str(sender),
            "recipient": None if recipient is None else str(recipient),
            "topic": None if topic is None else str(topic),
            "stream": f"{self._origin}:{sender}",
            "seq": 0,
            "timeout": timeout,
            "chain": chain or [],
            "msg": dumps(message),
        }

    async def request(
        self,
        message: Any,
        recipient: AgentId,
        *,
        sender: AgentId | None,
        parent: MessageContext | None,
        timeout: float | None,  # noqa: ASYNC109
        token: CancellationToken | None,
        message_id: str | None,
        chain: list[str] | None = None,
    ) -> Any:
        """Send a direct request and return its result; see the module docstring.

        `chain` holds the ids of the requests whose handlers wait on this one (outermost
        first), so an agent whose turn waits on it can take it within that turn."""
        mid = message_id or new_id()
        ctx: MessageContext | None = None
        if self._interventions:
            ctx = _context(mid, parent, sender, recipient, None)
            message = await self._intervene("send", message, ctx, recipient)
        span = None
        if tracing.enabled():
            ctx = ctx or _context(mid, parent, sender, recipient, None)
            span = _start_send(ctx, message)
        bound = None if timeout is None or math.isinf(timeout) else timeout
        env = self.envelope(
            message,
            mid=mid,
            parent=parent,
            sender=sender,
            recipient=recipient,
            topic=None,
            timeout=bound,
            chain=chain,
        )
        if span is not None and ctx is not None:
            env["tp"] = ctx.trace_context
        what = f"{type(message).__name__} {mid} to {recipient}"
        # The actor bounds the handler by `timeout`; this process waits a little longer,
        # so the actor's own typed answer arrives first when it can.
        deadline = None if bound is None else time.monotonic() + bound + self._grace + 1.0
        self.pending += 1
        try:
            result = await self._send(env, recipient, what, deadline, token, parent)
        except BaseException as exc:
            if span is not None:
                tracing.end_span(span, exc)
                span = None
            raise
        finally:
            self.pending -= 1
            if span is not None:
                span.end()
        if ctx is not None:
            result = await self._intervene("response", result, ctx, recipient)
        return result

    async def _send(
        self,
        env: wire.Envelope,
        recipient: AgentId,
        what: str,
        deadline: float | None,
        token: CancellationToken | None,
        parent: MessageContext | None,
    ) -> Any:
        if recipient[0] == LOCAL_TYPE:
            return await self._ask_local(env, what, deadline)
        while True:
            try:
                handle = await self.handle_for(recipient, deadline)
            except builtins.TimeoutError:
                raise TimeoutError(f"agent {recipient} could not be reached for {what}") from None
            self.number(env, recipient)
            address = self._addresses.get(recipient)
            try:
                reply = None
                if address is not None and len(env["msg"]) < DIRECT_LIMIT:
                    try:
                        reply = await self._await_direct(
                            address, env, what, deadline, token, parent
                        )
                    except Refused:  # nothing was sent: this actor takes Ray calls instead
                        if self._handles.get(recipient) is handle:
                            self._addresses[recipient] = None
                if reply is None:
                    reply = await self._await_ray(handle, env, what, deadline, token, parent)
            except Lost as exc:
                if address is not None:
                    self._direct.drop(address)
                self.forget(recipient)
                left = _remaining(deadline)
                wait = _CONFIRM_WAIT if left is None else left + self._grace + 5.0
                if not await died(handle, min(wait, _CONFIRM_WAIT)):
                    raise AgentUnavailable(
                        f"the stream to the actor of agent {recipient} broke with {what}, and "
                        "the actor still answers Ray; the handler may have run, so it is not "
                        f"sent again: retry if it is safe to ({exc})",
                        agent_id=str(recipient),
                    ) from None
                if await self._retired(handle, recipient):
                    continue  # evicted before the message ran: send it to the new actor
                raise self._unavailable(recipient, what, exc) from None
            except ActorDiedError as exc:
                self.forget(recipient)
                if await self._retired(handle, recipient):
                    continue  # evicted before the message ran: send it to the new actor
                raise self._unavailable(recipient, what, exc) from None
            except RayActorError as exc:
                self.forget(recipient)
                raise AgentUnavailable(
                    f"the actor of agent {recipient} is unreachable for {what}: {exc}",
                    agent_id=str(recipient),
                ) from None
            if reply.get("gone") is True:
                self.forget(recipient)
                await asyncio.sleep(_RETRY_PAUSE)
                continue
            return wire.result(reply, what)

    @staticmethod
    def _unavailable(recipient: AgentId, what: str, exc: BaseException) -> AgentUnavailable:
        return AgentUnavailable(
            f"the actor of agent {recipient} died with {what} (its worker or node was "
            "lost); the handler may have run, so it is not sent again: retry if it is "
            f"safe to ({exc.__class__.__name__})",
            agent_id=str(recipient),
        )

    async def _ask_local(self, env: wire.Envelope, what: str, deadline: float | None) -> Any:
        wait = _remaining(deadline)
        bound = None if wait is None else wait + 5.0
        try:
            reply = await self._to_directory("q", env, bound, w=wait)
            if reply is None:
                reply = await asyncio.wait_for(_wait(self._directory.ask.remote(env, wait)), bound)
        except builtins.TimeoutError:
            raise TimeoutError(f"no reply to {what} from the local subscriber") from None
        except RayActorError as exc:
            raise AgentUnavailable(
                f"the runtime's directory actor is gone (sending {what}): {exc}"
            ) from None
        return wire.result(reply, what)

    async def _retired(self, handle: Any, agent_id: AgentId) -> bool:
        actor = handle._actor_id.hex()
        ref = self._directory.forget.remote(str(agent_id), actor)
        return bool(await asyncio.wait_for(_wait(ref), self._grace + 5.0))

    async def _await_ray(
        self,
        handle: Any,
        env: wire.Envelope,
        what: str,
        deadline: float | None,
        token: CancellationToken | None,
        parent: MessageContext | None,
    ) -> wire.Envelope:
        waiter = asyncio.wrap_future(handle.request.remote(env).future())
        return await _bounded(
            waiter, lambda: handle.cancel.remote(env["id"]), env, what, deadline, token, parent
        )

    async def _await_direct(
        self,
        address: Address,
        env: wire.Envelope,
        what: str,
        deadline: float | None,
        token: CancellationToken | None,
        parent: MessageContext | None,
    ) -> wire.Envelope:
        conn = await self._direct.connection(address, _remaining(deadline))
        waiter = await conn.call("q", env)
        return await _bounded(
            waiter, lambda: conn.cancel(env["id"]), env, what, deadline, token, parent
        )

    async def publish(
        self,
        message: Any,
        topic: TopicId,
        *,
        sender: AgentId | None,
        parent: MessageContext | None,
        message_id: str | None,
    ) -> None:
        """Hand an event to the directory, which delivers it to each subscriber."""
        mid = message_id or new_id()
        ctx: MessageContext | None = None
        if self._interventions:
            ctx = _context(mid, parent, sender, None, topic)
            message = await self._intervene("publish", message, ctx, None)
            if message is DROP:
                return
        span = None
        if tracing.enabled():
            ctx = ctx or _context(mid, parent, sender, None, topic)
            span = _start_send(ctx, message)
        env = self.envelope(
            message,
            mid=mid,
            parent=parent,
            sender=sender,
            recipient=None,
            topic=topic,
            timeout=None,
        )
        if span is not None and ctx is not None:
            env["tp"] = ctx.trace_context
        self.pending += 1
        try:
            reply = await self._to_directory("e", env, self._grace + 30.0)
            if reply is None:
                reply = await self._directory_call(self._directory.publish.remote(env))
        except BaseException as exc:
            if span is not None:
                tracing.end_span(span, exc)
                span = None
            raise
        finally:
            self.pending -= 1
            if span is not None:
                span.end()
        wire.result(reply, f"event {mid} on {topic}")

    async def add_subscription(self, subscription: Subscription) -> None:
        ref = self._directory.add_subscription.remote(to_json(subscription))
        wire.result(await self._directory_call(ref), "add_subscription")

    async def remove_subscription(self, subscription_id: str) -> None:
        ref = self._directory.remove_subscription.remote(subscription_id)
        wire.result(await self._directory_call(ref), "remove_subscription")

    async def take(self, wait: float) -> list[dict[str, Any]]:
        """What waits in the directory for this process's local subscribers (a long poll
        of `wait` seconds at most), each item once and in order: the poll acknowledges
        what the last one brought, so a reply lost with its stream or its Ray call comes
        again with the next (see _inbox.py)."""
        bound = wait + self._grace + 30.0
        ack = self._taken.next
        try:
            reply = await self._to_directory("p", None, bound, origin=self._origin, w=wait, k=ack)
        except AgentUnavailable:  # the stream broke: the directory's end, or just the stream?
            if await died(self._directory, _CONFIRM_WAIT):
                raise
            self._directory_address = _UNKNOWN  # a new stream for the next poll
            reply = None
        except TimeoutError:  # no reply within the bound: the next poll asks again
            return []
        if reply is None:
            ref = self._directory.take.remote(self._origin, ack, wait)
            try:
                reply = await asyncio.wait_for(_wait(ref), bound)
            except builtins.TimeoutError:
                return []
        return self._taken.fresh(reply)

    def answer(self, message_id: str, reply: wire.Envelope) -> None:
        """A local subscriber's answer to request `message_id`, for the directory."""
        address = self._directory_address
        if isinstance(address, tuple):
            conn = self._direct.open_connection(address)
            if conn is not None and conn.note({"t": "a", "id": message_id, "reply": reply}):
                return
        self._directory.answer.remote(message_id, reply)

    async def _to_directory(
        self, kind: str, env: wire.Envelope | None, wait: float | None, **extra: Any
    ) -> Any:
        """The directory's answer over its stream; None when there is none (a Ray call
        then). A broken stream is `AgentUnavailable`; past `wait`, the builtin timeout."""
        if not self._use_direct or (env is not None and len(env["msg"]) >= DIRECT_LIMIT):
            return None
        if self._directory_address is _UNKNOWN:
            self._directory_address = await address_of(self._directory, self._grace + 30.0)
        address = self._directory_address
        if not isinstance(address, tuple):
            return None
        try:
            conn = await self._direct.connection(address, wait)
            waiter = await conn.call(kind, env, **extra)
        except Refused:
            self._directory_address = None
            return None
        try:
            return await asyncio.wait_for(waiter, wait)
        except builtins.TimeoutError:
            raise TimeoutError("the runtime's directory actor did not answer") from None
        except Lost as exc:
            self._direct.drop(address)
            raise AgentUnavailable(f"the stream to the runtime's directory broke: {exc}") from None

    async def _directory_call(self, ref: Any) -> Any:
        try:
            return await asyncio.wait_for(_wait(ref), self._grace + 30.0)
        except builtins.TimeoutError:
            raise TimeoutError("the runtime's directory actor did not answer") from None
        except RayActorError as exc:
            raise AgentUnavailable(f"the runtime's directory actor is gone: {exc}") from None

    async def _intervene(
        self, kind: str, message: Any, ctx: MessageContext, agent: AgentId | None
    ) -> Any:
        for handler in self._interventions:
            if kind == "send":
                changed = await handler.on_send(message, ctx, agent)  # type: ignore[arg-type]
            elif kind == "publish":
                changed = await handler.on_publish(message, ctx)
            else:
                changed = await handler.on_response(message, ctx, agent)  # type: ignore[arg-type]
            if changed is DROP:
                if kind == "publish":
                    return DROP
                raise MessageDropped(
                    f"{'direct message' if kind == 'send' else 'the response to'} "
                    f"{ctx.message_id} ({agent}) was dropped by intervention "
                    f"{type(handler).__name__}"
                )
            message = changed
        return message


async def _bounded(
    waiter: asyncio.Future[Any],
    cancel: Callable[[], object],
    env: wire.Envelope,
    what: str,
    deadline: float | None,
    token: CancellationToken | None,
    parent: MessageContext | None,
) -> wire.Envelope:
    """Wait for a reply until `deadline`; cancellation by `token` (or the parent's) and the
    timeout both reach the handler through `cancel`."""
    loop = asyncio.get_running_loop()
    stopped = False

    def on_cancel() -> None:
        nonlocal stopped
        stopped = True
        loop.call_soon_threadsafe(waiter.cancel)

    tokens = [t for t in (token, None if parent is None else parent.cancellation_token) if t]
    for t in tokens:
        t.add_callback(on_cancel)
    try:
        reply: Any = await asyncio.wait_for(waiter, _remaining(deadline))
        return wire.check(reply, f"the reply to {what}")
    except builtins.TimeoutError:
        cancel()
        raise TimeoutError(
            f"no reply to {what} within {env['timeout']}s (the actor did not answer "
            "even with its cancellation); raise the timeout, or make the handler faster"
        ) from None
    except asyncio.CancelledError:
        cancel()  # the handler sees its token cancelled
        if stopped:
            raise CancelledError(f"{what} was cancelled by its CancellationToken") from None
        raise
    finally:
        for t in tokens:
            t.remove_callback(on_cancel)


async def _wait(ref: Any) -> Any:
    """Await a Ray object ref from any asyncio loop."""
    return await asyncio.wrap_future(ref.future())


def _context(
    mid: str,
    parent: MessageContext | None,
    sender: AgentId | None,
    recipient: AgentId | None,
    topic: TopicId | None,
) -> MessageContext:
    return MessageContext(
        message_id=mid,
        correlation_id=mid if parent is None else parent.correlation_id,
        causation_id=None if parent is None else parent.message_id,
        sender=sender,
        recipient=recipient,
        topic_id=topic,
        timestamp=time.time(),
        cancellation_token=CancellationToken(),
        is_rpc=recipient is not None,
    )
