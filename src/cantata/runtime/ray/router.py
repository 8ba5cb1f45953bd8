"""How one process (a driver, or a host of the pool) reaches agents on the cluster.

An agent's host is `Membership.owner` of its id (rendezvous hashing over the pool's hosts,
see membership.py), computed here: a request goes from this process straight to that host,
over one direct stream per host (see direct.py), or as a Ray call where no stream can be
opened. No actor sits between. The router numbers what it sends each host (one sequence
per router and host, so the host admits them in the order sent: per-sender order), runs
the process's interventions, bounds every wait, and turns the ways a host can fail into
cantata errors:

- a host that refuses a message as no longer its own (``{"moved": version}``: nothing
  ran) makes the router read the membership again and send it where it now belongs,
  waiting (briefly, within the caller's timeout) while a new membership is committed;
- a request whose host dies or whose stream breaks while it holds the message raises
  `AgentUnavailable`: the handler may have run, so it is not repeated (at most once); the
  router reads the membership and the host's address again for the next message, which
  activates the agent where the membership puts it (from the store when there is one);
- a publication goes to each host with subscribers once, naming them; a host that dies
  with it, or refuses some as moved, gets it again (or their new host does) with the same
  message id (at least once: the agent sees `ctx.is_redelivery` for an id it recorded).

Subscriptions are replicated: each router holds all of them (to find a publication's
hosts), kept in the pool's config record and pushed to every host on change.

A request or event to a local subscriber (an address of type `LOCAL_TYPE`: a callback in
some driver, see `AgentRuntime.add_local_subscriber`) goes through the directory actor,
which queues it for that process (see directory.py); nothing else does.
"""

from __future__ import annotations

import asyncio
import builtins
import logging
import math
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ray.exceptions import ActorDiedError, ActorUnavailableError, RayActorError, RayError

import ray

from ...core import (
    CancellationToken,
    ConfigurationError,
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
from .membership import Membership, Records
from .waits import Deadlines, Described, await_ref, await_reply, remaining

if TYPE_CHECKING:
    from .host import PoolHost

__all__: list[str] = []

_log = logging.getLogger("cantata.runtime.ray")
_UNKNOWN = object()  # the directory's address, before it is asked
_MOVE_PAUSE = 0.05  # seconds between reads of the membership while an agent moves
_REDELIVERIES = 5  # rounds a publication is sent again to hosts that died with it
_LOOKUP_WAIT = 30.0  # seconds at most to find a host's handle and address
_DIRECTORY_WAIT = 30.0
"""Seconds a call to the directory actor may take beyond the stop grace (its answer to a
publication, a long poll beyond its wait, its address)."""


class _Route:
    """How to reach one host: its Ray handle and direct address (None: Ray calls)."""

    __slots__ = ("address", "handle")

    def __init__(self, handle: Any, address: Address | None) -> None:
        self.handle = handle
        self.address = address


class Router:
    """Sends requests and events from this process; see the module docstring."""

    def __init__(
        self,
        *,
        pool: str,
        namespace: str,
        interventions: list[InterventionHandler],
        stop_grace: float,
        event_bound: float | None = None,
        origin: str | None = None,
        direct: bool = True,
        directory: Any = None,
        host: PoolHost | None = None,
        name: str = "",
    ) -> None:
        self._pool = pool
        self._namespace = namespace
        self._records = Records(pool, namespace)
        self._interventions = interventions
        self._grace = stop_grace
        self._directory_bound = stop_grace + _DIRECTORY_WAIT
        """How long a call to the directory actor may take (its stop grace, and then some)."""
        self._event_bound = event_bound
        self._origin = origin or new_id()
        self._use_direct = direct
        self._direct = DirectClient()
        self._directory = directory
        self._directory_address: Address | object | None = _UNKNOWN
        self._host = host  # the host this router lives in, if any
        self._name = name  # that host's name in the membership
        self._membership: Membership | None = None
        self._stale = False  # a host was lost: read the membership before the next send
        self._read_at = 0.0
        self._routes: dict[str, _Route] = {}
        self._lookups: dict[str, asyncio.Future[_Route]] = {}
        self._seq: dict[tuple[str, Address | None], int] = {}
        self._subs: dict[str, Subscription] = {}
        self._topic_cache: dict[TopicId, tuple[AgentId, ...]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._taken = Taken()  # what this process's local subscribers were handed
        self._deadlines = Deadlines()  # every request's timeout, by tick
        self.pending = 0  # requests and publications from here not yet answered

    @property
    def origin(self) -> str:
        """This process's name for the directory (its local subscribers' inbox)."""
        return self._origin

    @property
    def membership(self) -> Membership | None:
        return self._membership

    def adopt(self, membership: Membership) -> None:
        """Use `membership` from now on, if newer than the one held."""
        if self._membership is None or membership.version > self._membership.version:
            self._membership = membership
            for host in [h for h in self._routes if h not in membership.hosts]:
                self._forget(host)

    def close(self) -> None:
        """End the direct streams from here (requests still on them see them lost)."""
        self._direct.close()
        for task in list(self._tasks):
            task.cancel()

    # -- membership and routes ----------------------------------------------------------------

    async def current(self) -> Membership:
        """The membership to route by (read from the store at first, and after a loss)."""
        if self._membership is None or self._stale:
            self._stale = False
            await self.refresh()
        if self._membership is None:
            raise AgentUnavailable(
                f"the pool {self._pool!r} has no membership record: is its RayRuntime started?"
            )
        return self._membership

    async def refresh(self) -> bool:
        """Read the membership record again (at most every `_MOVE_PAUSE` seconds); whether
        a newer one was found."""
        wait = self._read_at + _MOVE_PAUSE - time.monotonic()
        if wait > 0:
            await asyncio.sleep(wait)
        self._read_at = time.monotonic()
        found = await asyncio.to_thread(self._records.membership)
        if found is not None and (
            self._membership is None or found.version > self._membership.version
        ):
            self.adopt(found)
            return True
        return False

    def _forget(self, host: str) -> None:
        route = self._routes.pop(host, None)
        if route is not None and route.address is not None:
            self._direct.drop(route.address)

    def _lost(self, host: str) -> None:
        """A host's stream broke or its actor died: find it again, and read the membership
        before the next message (a node may have left)."""
        self._forget(host)
        self._stale = True

    async def _route(self, host: str, deadline: float | None) -> _Route:
        route = self._routes.get(host)
        if route is not None:
            return route
        lookup = self._lookups.get(host)
        if lookup is None:
            lookup = self._lookups[host] = asyncio.ensure_future(self._look_up(host))
            lookup.add_done_callback(lambda _: self._lookups.pop(host, None))
        wait = remaining(deadline)
        try:
            return await asyncio.wait_for(asyncio.shield(lookup), wait)
        except builtins.TimeoutError:
            raise TimeoutError(f"host {host} could not be reached within {wait}s") from None

    async def _look_up(self, host: str) -> _Route:
        try:
            handle = await asyncio.to_thread(ray.get_actor, host, namespace=self._namespace)
        except ValueError:
            self._stale = True
            raise AgentUnavailable(f"host {host} of pool {self._pool!r} is gone") from None
        # A host Ray is restarting (its process died) says so until it is up again: wait
        # for it (bounded), so the next message reaches the new process.
        give_up = time.monotonic() + _LOOKUP_WAIT
        while True:
            try:
                ref: Any = handle.direct_address.remote()
                found = await asyncio.wait_for(asyncio.wrap_future(ref.future()), _LOOKUP_WAIT)
                break
            except ActorUnavailableError:
                if time.monotonic() >= give_up:
                    raise AgentUnavailable(f"host {host} did not come back") from None
                await asyncio.sleep(_MOVE_PAUSE)
            except (RayError, builtins.TimeoutError) as exc:  # dead, or its node is gone
                self._stale = True
                raise AgentUnavailable(
                    f"host {host} of pool {self._pool!r} is gone: {exc}"
                ) from None
        address = None
        if self._use_direct and found is not None:
            address = (str(found[0]), int(found[1]), str(found[2]))
        route = self._routes[host] = _Route(handle, address)
        return route

    async def _submit(
        self, host: str, env: wire.Envelope, kind: str, deadline: float | None
    ) -> tuple[asyncio.Future[Any], Callable[[], object]]:
        """Send `env` to `host` (numbered in its sequence); its reply's future and how to
        cancel its handler. `Refused` never escapes: no stream means a Ray call."""
        if self._host is not None and host == self._name:
            env["stream"] = f"{self._origin}/self"
            env["seq"] = self._next((host, None))
            waiter: asyncio.Future[Any] = asyncio.ensure_future(self._host.handle(env, kind))
            mid = str(env["id"])
            return waiter, lambda: self._host.cancel(mid) if self._host is not None else None
        route = self._routes.get(host)  # known (the usual case): no coroutine for it
        if route is None:
            route = await self._route(host, deadline)
        address = route.address
        if address is not None and len(env["msg"]) < DIRECT_LIMIT:
            try:
                conn = self._direct.open_connection(address)
                if conn is None:
                    conn = await self._direct.connection(address, remaining(deadline))
                env["seq"] = self._next((host, address))
                waiter = conn.send(kind, env)
                if conn.backlogged:
                    await conn.drain()
                mid = str(env["id"])
                return waiter, lambda: conn.cancel(mid)
            except Refused:
                if self._routes.get(host) is route:
                    route.address = None  # Ray calls to this host from now on
        env["seq"] = self._next((host, None))
        method = route.handle.request if kind == "q" else route.handle.event
        waiter = asyncio.wrap_future(method.remote(env).future())
        handle, mid = route.handle, str(env["id"])
        return waiter, lambda: handle.cancel.remote(mid)

    def _next(self, key: tuple[str, Address | None]) -> int:
        seq = self._seq.get(key, 0)
        self._seq[key] = seq + 1
        return seq

    # -- messages ---------------------------------------------------------------------------

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
        env: wire.Envelope = {
            "v": wire.WIRE_VERSION,
            "id": mid,
            "recipient": None if recipient is None else str(recipient),
            "stream": self._origin,
            "seq": 0,
            "mv": 0,
            "timeout": timeout,
            "msg": dumps(message),
        }
        # What is empty is left out (every frame is JSON, encoded and parsed per message).
        if parent is not None:
            env["corr"] = parent.correlation_id
            env["cause"] = parent.message_id
        if sender is not None:
            env["sender"] = str(sender)
        if topic is not None:
            env["topic"] = str(topic)
        if chain:
            env["chain"] = chain
        return env

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
        what = Described(message, mid, recipient)
        # The host bounds the handler by `timeout`; this process waits a little longer,
        # so the host's own typed answer arrives first when it can.
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
        what: object,
        deadline: float | None,
        token: CancellationToken | None,
        parent: MessageContext | None,
    ) -> Any:
        if recipient[0] == LOCAL_TYPE:
            return await self._ask_local(env, what, deadline)
        name = str(recipient)
        give_up = time.monotonic() + _LOOKUP_WAIT if deadline is None else deadline
        while True:
            membership = self._membership
            if membership is None or self._stale:
                membership = await self.current()
            host = membership.owner(name)
            env["mv"] = membership.version
            try:
                waiter, cancel = await self._submit(host, env, "q", deadline)
            except AgentUnavailable:  # its host is gone: the membership will say where now
                if time.monotonic() >= give_up:
                    raise
                await self._moving(recipient, what, give_up)
                continue
            try:
                reply = await await_reply(
                    waiter, cancel, env, what, deadline, token, parent, self._deadlines
                )
            except Lost as exc:
                self._lost(host)
                raise self._unavailable(recipient, what, exc) from None
            except RayError as exc:  # the host died, or Ray cannot reach or place it
                self._lost(host)
                raise self._unavailable(recipient, what, exc) from None
            if "moved" in reply:
                await self._moving(recipient, what, deadline)
                continue
            return wire.result(reply, what)

    async def _moving(self, agent: AgentId, what: object, deadline: float | None) -> None:
        """A host refused a message as no longer its own: read the membership again (it
        is being committed, or this router held an old one), within the deadline."""
        left = remaining(deadline)
        if left is not None and left <= _MOVE_PAUSE:
            raise TimeoutError(
                f"agent {agent} was moving between hosts for all of the timeout of {what}"
            )
        await self.refresh()

    @staticmethod
    def _unavailable(recipient: AgentId, what: object, exc: BaseException) -> AgentUnavailable:
        return AgentUnavailable(
            f"the host of agent {recipient} was lost with {what} (its process or node died, "
            "or its stream broke); the handler may have run, so it is not sent again: retry "
            f"if it is safe to ({exc.__class__.__name__}: {exc})",
            agent_id=str(recipient),
        )

    async def _ask_local(self, env: wire.Envelope, what: object, deadline: float | None) -> Any:
        wait = remaining(deadline)
        bound = None if wait is None else wait + 5.0
        try:
            reply = await self._to_directory("q", env, bound, w=wait)
            if reply is None:
                directory = await self.directory()
                reply = await asyncio.wait_for(await_ref(directory.ask.remote(env, wait)), bound)
        except builtins.TimeoutError:
            raise TimeoutError(f"no reply to {what} from the local subscriber") from None
        except RayActorError as exc:
            raise AgentUnavailable(
                f"the runtime's directory actor is gone (sending {what}): {exc}"
            ) from None
        return wire.result(reply, what)

    def use_directory(self, directory: Any) -> None:
        """A directory actor: a new one (the last one died: its inbox for this process
        starts again from 0, so the acknowledgements do too), or the same one over a new
        stream."""
        if directory != self._directory:
            self._taken = Taken()
        self._directory = directory
        self._directory_address = _UNKNOWN

    async def directory(self) -> Any:
        """The local subscribers' actor (looked up by name on first use)."""
        if self._directory is None:
            try:
                self._directory = await asyncio.to_thread(
                    ray.get_actor, f"{self._pool}/directory", namespace=self._namespace
                )
            except ValueError:
                raise AgentUnavailable(
                    f"the local subscribers' actor of pool {self._pool!r} is gone"
                ) from None
        return self._directory

    # -- publications --------------------------------------------------------------------------

    def subscribe(self, subscription: Subscription) -> None:
        """Route matching topics from this process (this router only)."""
        self._subs[subscription.id] = subscription
        self._topic_cache.clear()

    def unsubscribe(self, subscription_id: str) -> None:
        self._subs.pop(subscription_id, None)
        self._topic_cache.clear()

    def has_subscription(self, subscription_id: str) -> bool:
        return subscription_id in self._subs

    def _recipients(self, topic: TopicId) -> tuple[AgentId, ...]:
        found = self._topic_cache.get(topic)
        if found is None:
            matched = [s.map_to_agent(topic) for s in self._subs.values() if s.is_match(topic)]
            found = tuple(dict.fromkeys(matched))
            if all(s.by_topic_type for s in self._subs.values()):
                if len(self._topic_cache) >= 4096:
                    self._topic_cache.clear()
                self._topic_cache[topic] = found
        return found

    async def publish(
        self,
        message: Any,
        topic: TopicId,
        *,
        sender: AgentId | None,
        parent: MessageContext | None,
        message_id: str | None,
    ) -> None:
        """Send an event to each host with subscribers of `topic` once (see the module
        docstring); returns once each has it on its way (handlers run later)."""
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
        found = [a for a in self._recipients(topic) if a != sender]
        local = [str(a) for a in found if a[0] == LOCAL_TYPE]
        agents = [str(a) for a in found if a[0] != LOCAL_TYPE]
        self.pending += 1
        try:
            if local:
                item = {**env, "recipients": local}
                reply = await self._to_directory("e", item, self._directory_bound)
                if reply is None:
                    directory = await self.directory()
                    reply = await self._directory_call(directory.publish.remote(item))
                wire.result(reply, f"event {mid} on {topic}")
            if agents:
                sent = await self._post(env, agents)
                task = asyncio.get_running_loop().create_task(self._follow(env, sent))
                self.pending += 1
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
        except BaseException as exc:
            if span is not None:
                tracing.end_span(span, exc)
                span = None
            raise
        finally:
            self.pending -= 1
            if span is not None:
                span.end()

    async def _post(
        self, env: wire.Envelope, agents: list[str]
    ) -> list[tuple[str, list[str], asyncio.Future[Any] | BaseException]]:
        """Hand `env` to the host of each of `agents`, once per host, naming its own."""
        membership = await self.current()
        by_host: dict[str, list[str]] = {}
        for agent in agents:
            by_host.setdefault(membership.owner(agent), []).append(agent)
        sent: list[tuple[str, list[str], asyncio.Future[Any] | BaseException]] = []
        for host, names in by_host.items():
            item = {**env, "recipients": names, "mv": membership.version}
            try:
                waiter, _ = await self._submit(host, item, "e", time.monotonic() + _LOOKUP_WAIT)
                sent.append((host, names, waiter))
            except Exception as exc:
                sent.append((host, names, exc))
        return sent

    async def _follow(
        self,
        env: wire.Envelope,
        sent: list[tuple[str, list[str], asyncio.Future[Any] | BaseException]],
    ) -> None:
        """Wait for each host's answer; send again what a lost host had, or what a host
        refused as moved, to where the membership now puts it (same message id)."""
        try:
            for _ in range(_REDELIVERIES):
                again: list[str] = []
                for host, names, waiter in sent:
                    try:
                        if isinstance(waiter, BaseException):
                            raise waiter
                        reply = await asyncio.wait_for(waiter, self._event_bound)
                    except builtins.TimeoutError:
                        _log.error(
                            "event %s to host %s: no answer within %ss",
                            env["id"],
                            host,
                            self._event_bound,
                        )
                        continue
                    except (Lost, RayError, AgentUnavailable, TimeoutError):
                        self._lost(host)
                        again.extend(names)
                        continue
                    if isinstance(reply, dict) and reply.get("moved"):
                        again.extend(str(m) for m in reply["moved"])
                    elif isinstance(reply, dict) and "err" in reply:
                        _log.error("event %s to host %s: %s", env["id"], host, reply["err"])
                if not again:
                    return
                await self.refresh()
                sent = await self._post(env, again)
            _log.error("event %s: its hosts kept failing; given up", env["id"])
        finally:
            self.pending -= 1

    # -- subscriptions, cluster-wide -----------------------------------------------------------

    async def add_subscription(self, subscription: Subscription) -> None:
        """Add `subscription` everywhere: here, in the pool's config record, on every host."""
        if subscription.id in self._subs:
            raise ConfigurationError(
                f"a subscription with id {subscription.id!r} already exists; remove it first"
            )
        data = to_json(subscription)
        self.subscribe(subscription)

        def write(config: dict[str, Any]) -> None:
            config["subscriptions"][subscription.id] = data

        await self._replicate(write, "subscribe", data)

    async def remove_subscription(self, subscription_id: str) -> None:
        if subscription_id not in self._subs:
            raise ConfigurationError(
                f"no subscription with id {subscription_id!r}; known: {sorted(self._subs)}"
            )
        self.unsubscribe(subscription_id)

        def write(config: dict[str, Any]) -> None:
            config["subscriptions"].pop(subscription_id, None)

        await self._replicate(write, "unsubscribe", subscription_id)

    async def _replicate(
        self, change: Callable[[dict[str, Any]], None], method: str, *args: Any
    ) -> None:
        await asyncio.to_thread(self._records.update_config, change)
        await self.broadcast(method, *args)

    async def broadcast(self, method: str, *args: Any) -> list[Any]:
        """Call `method(*args)` on every host of the membership (bounded); their answers
        (a host that cannot be reached gives its error: it reads the config at start)."""
        membership = await self.current()
        calls = []
        for host in membership.hosts:
            if self._host is not None and host == self._name:
                continue  # this router's own host holds what it just did
            calls.append(self._call_host(host, method, *args))
        return list(await asyncio.gather(*calls, return_exceptions=True))

    async def release(self, agents: list[AgentId]) -> int:
        """Have each agent's host release it (`LocalRuntime.release_agents`), one call per
        host, at once; this router's own host is left out (its runtime does its share).
        How many left memory at once."""
        membership = await self.current()
        by_host: dict[str, list[str]] = {}
        for agent_id in agents:
            if agent_id.type == LOCAL_TYPE:
                continue  # a local subscriber: its driver removes it
            host = membership.owner(str(agent_id))
            if self._host is None or host != self._name:
                by_host.setdefault(host, []).append(str(agent_id))
        counts = await asyncio.gather(
            *(self._call_host(host, "release", names) for host, names in by_host.items())
        )
        return sum(int(c) for c in counts)

    async def _call_host(self, host: str, method: str, *args: Any) -> Any:
        route = await self._route(host, time.monotonic() + _LOOKUP_WAIT)
        ref = getattr(route.handle, method).remote(*args)
        return await asyncio.wait_for(await_ref(ref), self._grace + _LOOKUP_WAIT)

    # -- local subscribers -----------------------------------------------------------------------

    async def take(self, wait: float) -> list[dict[str, Any]]:
        """What waits in the directory for this process's local subscribers (a long poll
        of `wait` seconds at most), each item once and in order: the poll acknowledges
        what the last one brought, so a reply lost with its stream or its Ray call comes
        again with the next (see _inbox.py)."""
        bound = wait + self._directory_bound
        ack = self._taken.next
        try:
            reply = await self._to_directory("p", None, bound, origin=self._origin, w=wait, k=ack)
        except AgentUnavailable:  # the stream broke: the directory's end, or just the stream?
            if await died(await self.directory()):
                raise
            self._directory_address = _UNKNOWN  # a new stream for the next poll
            reply = None
        except TimeoutError:  # no reply within the bound: the next poll asks again
            return []
        if reply is None:
            ref = (await self.directory()).take.remote(self._origin, ack, wait)
            try:
                reply = await asyncio.wait_for(await_ref(ref), bound)
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
        if self._directory is not None:
            self._directory.answer.remote(message_id, reply)

    async def _to_directory(
        self, kind: str, env: wire.Envelope | None, wait: float | None, **extra: Any
    ) -> Any:
        """The directory's answer over its stream; None when there is none (a Ray call
        then). A broken stream is `AgentUnavailable`; past `wait`, the builtin timeout."""
        if not self._use_direct or (env is not None and len(env["msg"]) >= DIRECT_LIMIT):
            return None
        if self._directory_address is _UNKNOWN:
            directory = await self.directory()
            self._directory_address = await address_of(directory, self._directory_bound)
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
            return await asyncio.wait_for(await_ref(ref), self._directory_bound)
        except builtins.TimeoutError:
            raise TimeoutError("the runtime's directory actor did not answer") from None
        except RayActorError as exc:
            if isinstance(exc, ActorDiedError):  # the next call looks its name up again
                self._directory, self._directory_address = None, _UNKNOWN
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
