"""Runtime message spans: ``send``/``publish`` at the sender, ``process`` around the
handler, with the envelope's ids; the trace context crosses each hop in the envelope (a
W3C traceparent string), so a chain of agents is one trace: a direct request's handler
span is the send span's child, a published event's handler span is the publish span's
child and links to it. While tracing is off, envelopes carry nothing and no span is made."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from cantata.agents import ChatAgent
from cantata.core import Message, RunError, Usage, register
from cantata.models import ScriptedChatClient, tool_call
from cantata.runtime import (
    AgentId,
    DeliveryFailed,
    LocalRuntime,
    MessageContext,
    RoutedAgent,
    TopicId,
    TypeSubscription,
    event,
    rpc,
)
from cantata.tools import tool


@register(name="test_tracing.Ask")
@dataclass
class Ask:
    """A direct request; `then` names the next agent to ask, if any."""

    then: str | None = None


@register(name="test_tracing.Note")
@dataclass
class Note:
    """A broadcast event; the receiving agent publishes `next_topic` on, if any."""

    hops: int


class Hop(RoutedAgent):
    """Asks the next agent (rpc) or passes the event on (publish), recording each envelope."""

    seen: list[MessageContext] = []

    @rpc
    async def on_ask(self, message: Ask, ctx: MessageContext) -> str:
        Hop.seen.append(ctx)
        if message.then is None:
            return str(self.id)
        return await self.send_message(Ask(), AgentId(message.then, "k"))

    @event
    async def on_note(self, message: Note, ctx: MessageContext) -> None:
        Hop.seen.append(ctx)
        if message.hops > 1:
            await self.publish_message(Note(message.hops - 1), TopicId(f"t{message.hops - 1}", "k"))


class Failing(RoutedAgent):
    @rpc
    async def on_ask(self, message: Ask, ctx: MessageContext) -> str:
        raise RunError("no")

    @event
    async def on_note(self, message: Note, ctx: MessageContext) -> None:
        raise RunError("not this either")


def only(exporter: InMemorySpanExporter, name: str) -> ReadableSpan:
    found = [s for s in exporter.get_finished_spans() if s.name == name]
    assert len(found) == 1, [s.name for s in exporter.get_finished_spans()]
    return found[0]


def is_child(child: ReadableSpan, parent: ReadableSpan) -> bool:
    return child.parent is not None and child.parent.span_id == parent.context.span_id


def attrs(span: ReadableSpan) -> dict[str, Any]:
    assert span.attributes is not None
    return dict(span.attributes)


@pytest.fixture(autouse=True)
def fresh_log() -> None:
    Hop.seen = []


async def test_a_request_chain_is_one_trace_of_send_and_process_spans(
    spans: InMemorySpanExporter,
) -> None:
    async with LocalRuntime() as runtime:
        for name in ("a", "b"):
            await runtime.register_factory(name, Hop)
        assert await runtime.send_message(Ask(then="b"), AgentId("a", "k")) == "b/k"
    send_a, process_a = only(spans, "send a"), only(spans, "process a")
    send_b, process_b = only(spans, "send b"), only(spans, "process b")
    assert send_a.parent is None
    assert is_child(process_a, send_a) and is_child(send_b, process_a)
    assert is_child(process_b, send_b)
    assert process_a.links == () and process_b.links == ()  # direct: a child, no link
    assert len({s.context.trace_id for s in spans.get_finished_spans()}) == 1
    assert (send_a.kind, process_a.kind) == (SpanKind.PRODUCER, SpanKind.CONSUMER)
    first, second = Hop.seen
    for span, ctx in ((send_a, first), (process_a, first), (send_b, second), (process_b, second)):
        found = attrs(span)
        assert found["cantata.message.id"] == ctx.message_id
        assert found["cantata.message.type"] == "Ask"
        assert found["cantata.correlation_id"] == first.message_id  # the root's id
        assert found.get("cantata.causation_id") == ctx.causation_id
    assert second.causation_id == first.message_id
    assert attrs(process_b)["messaging.operation.name"] == "process"
    # the envelope carried the send span as a W3C traceparent
    assert second.trace_context is not None
    assert second.trace_context.split("-")[2] == f"{send_b.context.span_id:016x}"


async def test_a_publish_chain_links_each_handler_to_its_publish_span(
    spans: InMemorySpanExporter,
) -> None:
    async with LocalRuntime() as runtime:
        for hops, name in ((3, "a"), (2, "b"), (1, "c")):
            await runtime.register_factory(name, Hop)
            await runtime.add_subscription(TypeSubscription(f"t{hops}", name))
        await runtime.publish_message(Note(3), TopicId("t3", "k"))
        await runtime.stop_when_idle()
    assert [str(ctx.recipient) for ctx in Hop.seen] == ["a/k", "b/k", "c/k"]
    chain = [
        (only(spans, "publish t3"), only(spans, "process a")),
        (only(spans, "publish t2"), only(spans, "process b")),
        (only(spans, "publish t1"), only(spans, "process c")),
    ]
    assert chain[0][0].parent is None
    for publish, process in chain:
        assert is_child(process, publish)
        assert [link.context.span_id for link in process.links] == [publish.context.span_id]
        assert attrs(publish)["messaging.destination.name"] == attrs(publish)["cantata.topic"][:2]
    assert is_child(chain[1][0], chain[0][1]) and is_child(chain[2][0], chain[1][1])
    assert len({s.context.trace_id for s in spans.get_finished_spans()}) == 1
    root = Hop.seen[0]
    for (publish, process), ctx in zip(chain, Hop.seen, strict=True):
        assert attrs(process)["cantata.correlation_id"] == root.message_id
        assert attrs(process)["cantata.message.id"] == ctx.message_id
        assert attrs(publish)["cantata.message.id"] == ctx.message_id
    assert [c.causation_id for c in Hop.seen] == [
        None,
        Hop.seen[0].message_id,
        Hop.seen[1].message_id,
    ]


async def test_an_agent_run_in_a_handler_is_part_of_the_message_trace(
    spans: InMemorySpanExporter,
) -> None:
    @tool
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    def answer(messages: list[Message], options: object) -> object:
        if messages[-1].role != "tool":
            return Message("assistant", [tool_call("add", {"a": 2, "b": 3})])
        return "5"

    agent = ChatAgent(ScriptedChatClient(answer, usage=Usage(3, 1)), name="adder", tools=[add])

    class Host(RoutedAgent):
        @rpc
        async def on_ask(self, message: Ask, ctx: MessageContext) -> str:
            return (await agent.run("2+3?")).text

    async with LocalRuntime() as runtime:
        await runtime.register_factory("host", Host)
        assert await runtime.send_message(Ask(), AgentId("host", "k")) == "5"
    process, run = only(spans, "process host"), only(spans, "invoke_agent adder")
    assert is_child(run, process) and is_child(process, only(spans, "send host"))
    assert is_child(only(spans, "execute_tool add"), run)
    assert len({s.context.trace_id for s in spans.get_finished_spans()}) == 1


async def test_failed_handlers_are_error_spans(spans: InMemorySpanExporter) -> None:
    failures: list[DeliveryFailed] = []
    async with LocalRuntime(on_error=failures.append) as runtime:
        await runtime.register_factory("bad", Failing)
        await runtime.add_subscription(TypeSubscription("t1", "bad"))
        with pytest.raises(RunError):
            await runtime.send_message(Ask(), AgentId("bad", "k"))
        await runtime.publish_message(Note(1), TopicId("t1", "k"))
        await runtime.stop_when_idle()
    assert len(failures) == 1
    for name in ("send bad", "process bad"):
        failed = [s for s in spans.get_finished_spans() if s.name == name]
        assert failed and all(s.status.status_code is StatusCode.ERROR for s in failed)
        assert attrs(failed[0])["error.type"] == "RunError"
    assert only(spans, "publish t1").status.status_code is StatusCode.UNSET  # it was delivered


async def test_the_envelope_carries_plain_json_text(spans: InMemorySpanExporter) -> None:
    async with LocalRuntime(serialize_messages=True) as runtime:
        for name in ("a", "b"):
            await runtime.register_factory(name, Hop)
        await runtime.send_message(Ask(then="b"), AgentId("a", "k"))
    for ctx in Hop.seen:
        carried = json.loads(json.dumps(ctx.to_dict()))["trace_context"]
        assert isinstance(carried, str) and len(carried.split("-")) == 4


async def test_while_off_envelopes_carry_no_trace_and_no_span_is_made() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))  # not given to cantata
    async with LocalRuntime() as runtime:
        for name in ("a", "b"):
            await runtime.register_factory(name, Hop)
            await runtime.add_subscription(TypeSubscription("t1", name))
        await runtime.send_message(Ask(then="b"), AgentId("a", "k"))
        await runtime.publish_message(Note(1), TopicId("t1", "k"))
        await runtime.stop_when_idle()
    assert len(Hop.seen) == 4
    assert all(ctx.trace_context is None for ctx in Hop.seen)
    assert exporter.get_finished_spans() == ()
    provider.shutdown()
