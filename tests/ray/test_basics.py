"""RayRuntime on a two-node cluster: the AgentRuntime contract across processes."""

from __future__ import annotations

import asyncio
import itertools
import os
from pathlib import Path

import pytest
import ray_agents as ra

from cantata.core import (
    CancellationToken,
    CancelledError,
    ConfigurationError,
    RuntimeStateError,
    TimeoutError,
    Undeliverable,
    UnknownTypeError,
)
from cantata.runtime import AgentId, TopicId, TypeSubscription
from cantata.runtime.ray import RayRuntime, RemoteHandlerError

_names = itertools.count()


def fresh(**options: object) -> RayRuntime:
    """A runtime of two hosts per node (fewer processes to start than one per CPU)."""
    options.setdefault("hosts_per_node", 2)
    return RayRuntime(name=f"t{os.getpid()}-{next(_names)}", **options)  # type: ignore[arg-type]


async def test_requests_reach_one_activation_per_agent_in_order(cluster: object) -> None:
    async with fresh(hosts_per_node=None) as rt:  # the default pool
        await rt.register_factory("counter", ra.Counter)
        a, b = AgentId("counter", "a"), AgentId("counter", "b")
        results = await asyncio.gather(*(rt.send_message(ra.Add(1), a) for _ in range(20)))
        assert results == list(range(1, 21))  # one instance, turns in the order sent
        assert await rt.send_message(ra.Add(5), b) == 5
        seen_a = await rt.send_message(ra.Get(), a)
        seen_b = await rt.send_message(ra.Get(), b)
        assert isinstance(seen_a, ra.Seen)
        assert os.getpid() not in (seen_a.pid, seen_b.pid)  # in the pool's host processes
        assert sorted(map(str, await rt.live_agents())) == ["counter/a", "counter/b"]
        placed = await rt.placement()
        assert len(placed) == 8  # by default one host per CPU: 4 on each of the 2 nodes
        assert sum(p["agents"] for p in placed) == 2


async def test_agent_to_agent_request_and_envelope(cluster: object) -> None:
    async with fresh() as rt:
        await rt.register_factory("counter", ra.Counter)
        a, b = AgentId("counter", "a"), AgentId("counter", "b")
        assert await rt.send_message(ra.Ask(b, 7), a, message_id="m-1") == 7
        seen = await rt.send_message(ra.Get(), b)
        ctx = seen.contexts[0]
        assert ctx["sender"] == "counter/a" and ctx["recipient"] == "counter/b"
        assert ctx["correlation_id"] == "m-1" and ctx["causation_id"] == "m-1"
        assert ctx["is_rpc"] is True


async def test_publish_reaches_subscribers_but_not_the_sender(cluster: object) -> None:
    async with fresh() as rt:
        await rt.register_factory("counter", ra.Counter)
        a, b = AgentId("counter", "a"), AgentId("counter", "b")
        await rt.send_message(ra.Add(0), b)
        await rt.publish_message(ra.Note("from outside"), TopicId("news", "b"))
        await rt.send_message(ra.Shout(TopicId("news", "a"), "self"), a)  # a's own topic
        await rt.wait_until_idle(timeout=60)
        assert (await rt.send_message(ra.Get(), b)).notes == ["from outside", "total=0"]
        assert (await rt.send_message(ra.Get(), a)).notes == ["total=0"]  # no self-delivery
        await rt.send_message(ra.Shout(TopicId("news", "b"), "from a"), a)
        await rt.wait_until_idle(timeout=60)
        seen = await rt.send_message(ra.Get(), b)
        assert seen.notes == ["from outside", "from a", "total=0"]
        assert seen.contexts[-1]["sender"] == "counter/a"
        assert seen.contexts[-1]["topic_id"] == "news/b"


async def test_a_failing_event_handler_on_a_host_goes_to_on_error_there(
    cluster: object, tmp_path: Path
) -> None:
    errors = tmp_path / "errors.txt"
    async with fresh(on_error=ra.ErrorLog(str(errors))) as rt:
        agents = [AgentId(f"c{i}", "x") for i in range(20)]  # spread over the hosts
        for agent in agents:
            await rt.register_factory(agent.type, ra.Counter)
            await rt.add_subscription(TypeSubscription("all", agent.type))
        await rt.publish_message(ra.Note("fail:c3/x"), TopicId("all", "x"))
        await rt.publish_message(ra.Note("after"), TopicId("all", "x"))
        await rt.wait_until_idle(timeout=60)
        assert errors.read_text().splitlines() == ["c3/x ValueError: c3/x fails on this note"]
        hosts = {h["host"] for h in await rt.placement() if h["agents"]}
        assert len(hosts) > 1
        for agent in agents:  # the others had the note; every one has the next
            notes = (await rt.send_message(ra.Get(), agent)).notes
            expected = ["after"] if agent.type == "c3" else ["fail:c3/x", "after"]
            assert notes == [*expected, "total=0"], agent


async def test_errors_come_back_typed(cluster: object) -> None:
    async with fresh() as rt:
        await rt.register_factory("counter", ra.Counter)
        a = AgentId("counter", "a")
        with pytest.raises(ValueError, match="bad value from the handler"):
            await rt.send_message(ra.Fail("value"), a)
        with pytest.raises(RemoteHandlerError, match=r"ray_agents\.Refused") as caught:
            await rt.send_message(ra.Fail("own"), a)
        assert caught.value.remote_type == "ray_agents.Refused"
        with pytest.raises(Undeliverable, match="nobody"):
            await rt.send_message(ra.Get(), AgentId("nobody", "x"))
        with pytest.raises(UnknownTypeError):  # JSON only: an unregistered type never leaves
            await rt.send_message(object(), a)
        with pytest.raises(ConfigurationError, match="AgentId"):
            await rt.send_message(ra.Get(), "counter/a")  # type: ignore[arg-type]


async def test_timeout_and_cancellation_reach_the_handler(cluster: object) -> None:
    async with fresh() as rt:
        await rt.register_factory("counter", ra.Counter)
        a = AgentId("counter", "a")
        with pytest.raises(TimeoutError, match=r"within 0\.5s"):
            await rt.send_message(ra.Hang(), a, timeout=0.5, message_id="slow")
        token = CancellationToken()
        pending = asyncio.ensure_future(
            rt.send_message(ra.Hang(), a, cancellation_token=token, message_id="stopped")
        )
        await asyncio.sleep(0.5)
        token.cancel()
        with pytest.raises(CancelledError):
            await pending
        for _ in range(100):  # the cancel reaches the actor after the caller has its error
            cancelled = (await rt.send_message(ra.Get(), a)).cancelled
            if len(cancelled) == 2:
                break
            await asyncio.sleep(0.05)
        assert cancelled == ["slow:token", "stopped:token"]


async def test_lifecycle_refusals(cluster: object) -> None:
    rt = fresh()
    await rt.register_factory("counter", ra.Counter)
    with pytest.raises(RuntimeStateError, match="start"):
        await rt.send_message(ra.Get(), AgentId("counter", "a"))
    async with rt:
        with pytest.raises(ConfigurationError, match="already registered"):
            await rt.register_factory("counter", ra.Counter)
    with pytest.raises(RuntimeStateError, match="closed"):
        await rt.send_message(ra.Get(), AgentId("counter", "a"))
    with pytest.raises(ConfigurationError, match="store"):
        RayRuntime(evict_after=1.0)


async def test_the_senders_trace_context_reaches_the_handler(cluster: object) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from cantata.core import tracing

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.configure(provider)
    try:
        async with fresh() as rt:
            await rt.register_factory("counter", ra.Counter)
            a = AgentId("counter", "a")
            await rt.send_message(ra.Add(1), a)
            seen = await rt.send_message(ra.Get(), a)
    finally:
        tracing.configure(False)
    sends = [s for s in exporter.get_finished_spans() if s.name == "send counter"]
    assert len(sends) == 2
    carried = seen.contexts[0]["trace_context"]  # the Add's handler, in the actor
    assert carried.split("-")[1:3] == [
        f"{sends[0].context.trace_id:032x}",
        f"{sends[0].context.span_id:016x}",
    ]


async def test_the_runtime_logs_its_pool_at_info(
    cluster: object, caplog: pytest.LogCaptureFixture
) -> None:
    import logging

    with caplog.at_level(logging.INFO, logger="cantata.runtime.ray"):
        async with fresh() as rt:
            await rt.register_factory("counter", ra.Counter)
    said = [r.getMessage() for r in caplog.records if r.name == "cantata.runtime.ray"]
    assert any("pool of 4 hosts on 2 nodes" in m for m in said), said
