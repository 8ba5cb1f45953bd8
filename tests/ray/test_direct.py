"""The direct data path (direct.py): requests over a stream to the agent's actor, with the
same failure semantics as Ray calls; a bad frame is a typed error; a refused stream falls
back to Ray calls."""

from __future__ import annotations

import asyncio
import itertools
import math
import os
import socket
import struct
import sys
from typing import Any

import pytest
import ray_agents as ra

import ray
from cantata.core import CancellationToken, SerializationError
from cantata.runtime import AgentId
from cantata.runtime.ray import AgentUnavailable, RayRuntime, wire
from cantata.runtime.ray.direct import (
    DirectClient,
    DirectServer,
    Lost,
    Refused,
    encode,
    read_frame,
)

_names = itertools.count()


def fresh(**options: Any) -> RayRuntime:
    return RayRuntime(
        name=f"d{os.getpid()}-{next(_names)}", default_timeout=60, hosts_per_node=1, **options
    )


def host_of(rt: RayRuntime, agent: AgentId) -> Any:
    """The actor of the host `agent` lives on (by the pool's membership)."""
    return ray.get_actor(rt._router.membership.owner(str(agent)), namespace="cantata")  # type: ignore[union-attr]


def apart(rt: RayRuntime) -> tuple[AgentId, AgentId]:
    """Two counters on different hosts, so each host's message counts are one agent's."""
    membership = rt._router.membership  # type: ignore[union-attr]
    a = AgentId("counter", "a")
    b = next(
        AgentId("counter", f"b{i}")
        for i in range(100)
        if membership.owner(f"counter/b{i}") != membership.owner(str(a))
    )
    return a, b


async def paths(rt: RayRuntime, agent: AgentId) -> dict[str, int]:
    return dict(await host_of(rt, agent).paths.remote())


# -- the transport alone -------------------------------------------------------------------


async def _echo(frame: dict[str, Any]) -> wire.Envelope:
    return wire.ok({"echo": frame["env"]["id"], "rpc": frame["t"] == "q"})


async def test_frames_round_trip_over_a_stream() -> None:
    server = DirectServer(_echo, lambda frame: None)
    address = await server.start("127.0.0.1")
    client = DirectClient()
    try:
        conn = await client.connection(address, 5)
        waiters = [await conn.call("q", {"id": f"m{i}"}) for i in range(5)]
        replies = await asyncio.wait_for(asyncio.gather(*waiters), 5)
        assert [wire.result(r, "echo") for r in replies] == [
            {"echo": f"m{i}", "rpc": True} for i in range(5)
        ]
    finally:
        client.close()
        await server.close()


def _family(conn: Any) -> socket.AddressFamily:
    return conn._writer.get_extra_info("socket").family  # type: ignore[no-any-return]


@pytest.mark.skipif(sys.platform != "linux", reason="abstract Unix sockets are Linux's")
async def test_a_server_on_this_machine_is_reached_by_its_local_socket_else_by_tcp() -> None:
    """Without TLS, a router reaches a host on its own machine by the host's abstract Unix
    socket (named after the address and secret); a host with none (as one on another
    machine) is reached by TCP, the same frames either way."""
    near, far = DirectServer(_echo, lambda frame: None), DirectServer(_echo, lambda frame: None)
    client = DirectClient(tls=None)
    try:
        here = await near.start("127.0.0.1")
        there = await far.start("127.0.0.1")
        assert far._local is not None
        far._local.close()  # as if on another machine: no such name here
        await far._local.wait_closed()
        for address, family in ((here, socket.AF_UNIX), (there, socket.AF_INET)):
            conn = await client.connection(address, 5)
            assert _family(conn) == family
            reply = await asyncio.wait_for(await conn.call("q", {"id": "m"}), 5)
            assert wire.result(reply, "echo") == {"echo": "m", "rpc": True}
        # a wrong secret names no local socket, and the TCP listener refuses it
        with pytest.raises(Refused, match="secret"):
            await DirectClient(tls=None).connection((here[0], here[1], "0" * 32), 5)
    finally:
        client.close()
        await near.close()
        await far.close()


async def test_a_stream_past_its_limit_is_not_read_until_a_request_is_answered() -> None:
    gate = asyncio.Event()
    begun: list[str] = []

    async def held(frame: dict[str, Any]) -> wire.Envelope:
        begun.append(frame["env"]["id"])
        await gate.wait()
        return wire.ok(frame["env"]["id"])

    server = DirectServer(held, lambda frame: None, limit=3)
    other = DirectClient()
    client = DirectClient()
    try:
        address = await server.start("127.0.0.1")
        conn = await client.connection(address, 5)
        waiters = [await conn.call("q", {"id": f"m{i}"}) for i in range(10)]
        await asyncio.sleep(0.3)
        assert begun == ["m0", "m1", "m2"]  # the flooding stream waits; nothing is dropped
        # another stream to the same server is not held up by it
        other_conn = await other.connection(address, 5)
        extra = await other_conn.call("q", {"id": "x"})
        await asyncio.sleep(0.3)
        assert "x" in begun
        gate.set()
        replies = await asyncio.wait_for(asyncio.gather(*waiters, extra), 5)
        assert [wire.result(r, "held") for r in replies] == [*(f"m{i}" for i in range(10)), "x"]
        assert begun[:3] == ["m0", "m1", "m2"] and sorted(begun) == sorted([*replies_ids(10), "x"])
    finally:
        client.close()
        other.close()
        await server.close()


def replies_ids(n: int) -> list[str]:
    return [f"m{i}" for i in range(n)]


async def _opened(host: str, port: int, secret: str) -> Any:
    reader, writer = await asyncio.open_connection(host, port)
    writer.write(encode({"t": "h", "s": secret}))
    assert await asyncio.wait_for(read_frame(reader), 5) == {"t": "h"}
    return reader, writer


async def test_a_bad_frame_is_a_typed_error_on_both_sides() -> None:
    server = DirectServer(_echo, lambda frame: None)
    host, port, secret = await server.start("127.0.0.1")
    try:
        for bad in (
            struct.pack(">I", 8) + b"not json",
            struct.pack(">I", 2) + b"[]",
            struct.pack(">I", 0xFFFFFFFF),
            encode({"t": "zz"}),
        ):
            for greet in (False, True):  # as the first frame, and after the hello
                if greet:
                    reader, writer = await _opened(host, port, secret)
                else:
                    reader, writer = await asyncio.open_connection(host, port)
                writer.write(bad)
                answer = await asyncio.wait_for(read_frame(reader), 5)
                assert answer is not None and answer["t"] == "x"
                with pytest.raises(SerializationError):
                    raise wire.rebuild(answer["err"])
                assert await asyncio.wait_for(reader.read(), 5) == b""  # then it closes
                writer.close()
        # a router reading garbage from its host fails the call waiting on it, typed
        reader = asyncio.StreamReader()
        reader.feed_data(struct.pack(">I", 3) + b"{x}")
        with pytest.raises(SerializationError, match="not JSON"):
            await read_frame(reader)
    finally:
        await server.close()


async def test_a_refused_stream_is_refused_not_lost() -> None:
    from cantata.runtime.ray.direct import Refused

    server = DirectServer(_echo, lambda frame: None)
    host, port, secret = await server.start("127.0.0.1")
    try:
        with pytest.raises(Refused, match="refused the stream"):  # not its secret
            await DirectClient().connection((host, port, "0" * 32), 5)
    finally:
        await server.close()  # nothing listens there any more
    with pytest.raises(Refused):
        await DirectClient().connection((host, port, secret), 5)


class _Handlers:
    """Request handlers that wait for their token (one per message id, as a host's), and
    the `on_lost` that cancels it: what began, what was lost, what ended."""

    def __init__(self) -> None:
        self.tokens: dict[str, CancellationToken] = {}
        self.begun: list[str] = []
        self.lost: list[str] = []
        self.ended: dict[str, asyncio.Event] = {}

    async def on_request(self, frame: dict[str, Any]) -> wire.Envelope:
        mid = str(frame["env"]["id"])
        self.begun.append(mid)
        if mid.startswith("quick"):
            return wire.ok(mid)
        token = self.tokens[mid] = CancellationToken()
        ended = self.ended[mid] = asyncio.Event()
        token.add_callback(ended.set)
        await ended.wait()
        return wire.ok(f"{mid} cancelled")

    def on_lost(self, frame: dict[str, Any]) -> None:
        mid = str(frame["env"]["id"])
        self.lost.append(mid)
        self.tokens[mid].cancel()


async def test_a_stream_the_client_closes_cancels_its_unanswered_handlers() -> None:
    handlers = _Handlers()
    server = DirectServer(handlers.on_request, lambda frame: None, on_lost=handlers.on_lost)
    host, port, secret = await server.start("127.0.0.1")
    client = DirectClient()
    try:
        conn = await client.connection((host, port, secret), 5)
        slow = await conn.call("q", {"id": "slow"})
        quick = await conn.call("q", {"id": "quick"})
        assert wire.result(await asyncio.wait_for(quick, 5), "quick") == "quick"
        client.close()  # with "slow" still running
        with pytest.raises(Lost):
            await asyncio.wait_for(slow, 5)
        await asyncio.wait_for(handlers.ended["slow"].wait(), 5)  # its token cancelled
        assert handlers.lost == ["slow"]  # the answered request is left alone
        # a request followed at once by the stream's end: it never runs, or it is cancelled
        reader, writer = await _opened(host, port, secret)
        writer.write(encode({"t": "q", "n": 0, "env": {"id": "late"}}))
        writer.write_eof()
        assert await asyncio.wait_for(reader.read(), 5) == b""  # the server closed it
        writer.close()
        assert handlers.begun.count("late") == handlers.lost.count("late")
        assert all(token.is_cancelled for token in handlers.tokens.values())
    finally:
        client.close()
        await server.close()


async def test_a_server_that_closes_cancels_its_streams_unanswered_handlers() -> None:
    handlers = _Handlers()
    server = DirectServer(handlers.on_request, lambda frame: None, on_lost=handlers.on_lost)
    client = DirectClient()
    try:
        conn = await client.connection(await server.start("127.0.0.1"), 5)
        waiters = [await conn.call("q", {"id": mid}) for mid in ("one", "two", "quick")]
        assert wire.result(await asyncio.wait_for(waiters[2], 5), "quick") == "quick"
        await server.close()
        for waiter in waiters[:2]:
            with pytest.raises(Lost):
                await asyncio.wait_for(waiter, 5)
        assert sorted(handlers.lost) == ["one", "two"]
        assert all(token.is_cancelled for token in handlers.tokens.values())
    finally:
        client.close()
        await server.close()


# -- on the cluster ------------------------------------------------------------------------


async def test_requests_and_replies_go_over_the_direct_path(cluster: Any) -> None:
    async with fresh() as rt:
        await rt.register_factory("counter", ra.Counter)
        a, b = apart(rt)
        results = await asyncio.gather(*(rt.send_message(ra.Add(1), a) for _ in range(20)))
        assert results == list(range(1, 21))  # in the order sent
        assert await rt.send_message(ra.Ask(b, 7), a) == 7  # host to host
        assert await paths(rt, a) == {"ray": 0, "direct": 21}
        assert await paths(rt, b) == {"ray": 0, "direct": 1}


async def test_publish_reaches_a_subscriber_over_the_direct_path(cluster: Any) -> None:
    from cantata.runtime import TopicId

    async with fresh() as rt:
        await rt.register_factory("counter", ra.Counter)
        b = AgentId("counter", "b")
        await rt.send_message(ra.Add(0), b)
        await rt.publish_message(ra.Note("hello"), TopicId("news", "b"))
        await rt.wait_until_idle(timeout=60)
        assert (await rt.send_message(ra.Get(), b)).notes == ["hello", "total=0"]
        assert await paths(rt, b) == {"ray": 0, "direct": 3}


async def test_a_host_killed_mid_request_is_agent_unavailable_not_a_hang(cluster: Any) -> None:
    async with fresh() as rt:
        await rt.register_factory("counter", ra.Counter)
        a = AgentId("counter", "a")
        assert await rt.send_message(ra.Add(1), a) == 1
        pending = asyncio.ensure_future(rt.send_message(ra.Hang(), a))
        await asyncio.sleep(0.5)
        assert (await paths(rt, a))["direct"] == 2  # the Hang is in the host, by stream
        ray.kill(host_of(rt, a), no_restart=False)  # its process ends; Ray starts it again
        with pytest.raises(AgentUnavailable, match="counter/a"):
            await asyncio.wait_for(pending, 60)  # the bound only guards the test itself
        assert await rt.send_message(ra.Add(1), a) == 1  # a new process, from the factory
        assert (await paths(rt, a))["direct"] == 1


async def test_a_bad_frame_to_a_host_is_a_typed_error_and_the_host_goes_on(
    cluster: Any,
) -> None:
    async with fresh() as rt:
        await rt.register_factory("counter", ra.Counter)
        a = AgentId("counter", "a")
        await rt.send_message(ra.Add(1), a)
        host, port, secret = await host_of(rt, a).direct_address.remote()
        reader, writer = await _opened(host, port, secret)
        writer.write(struct.pack(">I", 5) + b"\xff\xfe{}!")
        answer = await asyncio.wait_for(read_frame(reader), 10)
        writer.close()
        assert answer is not None and answer["err"]["type"] == "SerializationError"
        # a frame that is JSON but an envelope of another version: answered, typed
        reader, writer = await _opened(host, port, secret)
        writer.write(encode({"t": "q", "n": 7, "env": {"v": 99, "id": "m"}}))
        answer = await asyncio.wait_for(read_frame(reader), 10)
        writer.close()
        assert answer is not None and answer["n"] == 7
        with pytest.raises(SerializationError, match="wire version 99"):
            wire.result(answer["reply"], "a request")
        assert await rt.send_message(ra.Add(1), a) == 2


async def test_a_refused_direct_path_falls_back_to_ray_calls(cluster: Any) -> None:
    async with fresh() as rt:
        await rt.register_factory("counter", ra.Counter)
        a = AgentId("counter", "a")
        assert await rt.send_message(ra.Add(1), a) == 1
        await host_of(rt, a).close_direct.remote()
        await asyncio.sleep(0.2)  # the driver reads the end of its (idle) stream
        assert await rt.send_message(ra.Add(1), a) == 2
        assert await rt.send_message(ra.Add(1), a) == 3
        assert await paths(rt, a) == {"ray": 2, "direct": 1}
    async with fresh(direct=False) as rt:  # turned off: Ray calls only
        await rt.register_factory("counter", ra.Counter)
        assert await rt.send_message(ra.Add(1), a) == 1
        assert await paths(rt, a) == {"ray": 1, "direct": 0}


async def test_a_stream_that_breaks_under_a_live_actor_is_agent_unavailable(
    cluster: Any, tmp_path: Any
) -> None:
    marker = tmp_path / "hanging"
    async with fresh() as rt:
        await rt.register_factory("counter", ra.Counter)
        a = AgentId("counter", "a")
        assert await rt.send_message(ra.Add(1), a) == 1
        # no timeout: only a cancellation ends this handler
        hang = rt.send_message(ra.Hang(str(marker)), a, timeout=math.inf, message_id="orphan")
        pending = asyncio.ensure_future(hang)
        async with asyncio.timeout(60):
            while not marker.exists():  # noqa: ASYNC110 (the handler hangs in the actor)
                await asyncio.sleep(0.05)
        await host_of(rt, a).close_direct.remote()  # the stream ends; the host lives on
        with pytest.raises(AgentUnavailable, match="stream broke"):
            await asyncio.wait_for(pending, 60)  # at most once: not sent again
        # nobody can read the hang's answer, so the actor cancelled it (its token): the
        # agent's turn is free for the next request (by Ray call), not held forever
        assert await rt.send_message(ra.Add(1), a, timeout=30) == 2  # the same actor
        assert (await rt.send_message(ra.Get(), a, timeout=30)).cancelled == ["orphan:token"]
        assert await paths(rt, a) == {"ray": 2, "direct": 2}


async def test_a_frame_holding_the_wrong_things_is_answered_with_a_typed_error() -> None:
    async def strict(frame: dict[str, Any]) -> wire.Envelope:
        return wire.ok(int(frame["env"]["id"]))  # ValueError for an id that is not a number

    server = DirectServer(strict, lambda frame: None)
    client = DirectClient()
    try:
        conn = await client.connection(await server.start("127.0.0.1"), 5)
        replies = await asyncio.wait_for(
            asyncio.gather(await conn.call("q", {"id": "x"}), await conn.call("q", {"id": "7"})),
            5,
        )
        with pytest.raises(ValueError, match="invalid literal"):
            wire.result(replies[0], "a request")
        assert wire.result(replies[1], "a request") == 7  # the stream goes on
    finally:
        client.close()
        await server.close()
