"""Agent run spans: every agent's `run` and `run_stream` is one ``invoke_agent {name}``
span (GenAI attributes, summed usage, the thread as conversation id), parent of the run's
model and tool spans; a stream's span ends when it ends, fails, is closed or is dropped,
and is never current in the caller between updates."""

from __future__ import annotations

import gc
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from cantata.agents import Agent, AgentResponse, ChatAgent
from cantata.core import Message, ModelError, Usage, tracing
from cantata.models import ScriptedChatClient, tool_call
from cantata.tools import tool


def adder(name: str = "adder") -> ChatAgent:
    @tool
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    def answer(messages: list[Message], options: object) -> object:
        if messages[-1].role != "tool":
            return Message("assistant", [tool_call("add", {"a": 2, "b": 3}, call_id="c1")])
        return "the sum is five, as asked"

    client = ScriptedChatClient(answer, usage=Usage(10, 4), chunk_size=4)
    return ChatAgent(client, name=name, tools=[add])


def named(exporter: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.name == name]


def only(exporter: InMemorySpanExporter, name: str) -> ReadableSpan:
    found = named(exporter, name)
    assert len(found) == 1, [s.name for s in exporter.get_finished_spans()]
    return found[0]


def children(exporter: InMemorySpanExporter, parent: ReadableSpan) -> list[str]:
    return sorted(
        s.name
        for s in exporter.get_finished_spans()
        if s.parent is not None and s.parent.span_id == parent.context.span_id
    )


def attrs(span: ReadableSpan) -> dict[str, Any]:
    assert span.attributes is not None
    return dict(span.attributes)


async def test_a_run_is_an_invoke_agent_span_over_its_model_and_tool_spans(
    spans: InMemorySpanExporter,
) -> None:
    agent = adder()
    thread = agent.create_thread()
    response = await agent.run("2+3?", thread=thread)
    run = only(spans, "invoke_agent adder")
    assert run.parent is None
    assert children(spans, run) == ["chat scripted", "chat scripted", "execute_tool add"]
    found = attrs(run)
    assert found["gen_ai.operation.name"] == "invoke_agent"
    assert found["gen_ai.agent.name"] == "adder"
    assert found["gen_ai.agent.id"] == agent.id
    assert found["gen_ai.conversation.id"] == thread.id == response.thread.id
    assert (found["gen_ai.usage.input_tokens"], found["gen_ai.usage.output_tokens"]) == (20, 8)
    assert run.status.status_code is StatusCode.UNSET
    assert not trace.get_current_span().get_span_context().is_valid  # nothing left current


async def test_a_stream_is_one_span_that_is_never_current_in_the_caller(
    spans: InMemorySpanExporter,
) -> None:
    agent = adder()
    stream = agent.run_stream("2+3?")
    seen = 0
    async for _ in stream:
        seen += 1
        # between updates the caller's context is its own
        assert not trace.get_current_span().get_span_context().is_valid
    assert seen > 2
    run = only(spans, "invoke_agent adder")
    assert children(spans, run) == ["chat scripted", "chat scripted", "execute_tool add"]
    found = attrs(run)
    assert found["gen_ai.conversation.id"] == stream.response.thread.id
    assert found["gen_ai.usage.input_tokens"] == 20


async def test_a_stream_closed_early_ends_its_span(spans: InMemorySpanExporter) -> None:
    stream = adder().run_stream("2+3?")
    async for _ in stream:
        break
    assert named(spans, "invoke_agent adder") == []  # still running
    await stream.aclose()
    run = only(spans, "invoke_agent adder")
    assert run.end_time is not None and run.status.status_code is StatusCode.UNSET


async def test_a_stream_dropped_unfinished_ends_its_span(spans: InMemorySpanExporter) -> None:
    stream = adder().run_stream("2+3?")
    async for _ in stream:
        break
    del stream
    gc.collect()
    assert only(spans, "invoke_agent adder").end_time is not None


async def test_a_stream_never_iterated_opens_no_span(spans: InMemorySpanExporter) -> None:
    stream = adder().run_stream("2+3?")
    del stream
    gc.collect()
    assert spans.get_finished_spans() == ()


async def test_a_failed_run_is_an_error_span(spans: InMemorySpanExporter) -> None:
    agent = ChatAgent(ScriptedChatClient([]), name="empty")
    with pytest.raises(ModelError):
        await agent.run("hi")
    run = only(spans, "invoke_agent empty")
    assert run.status.status_code is StatusCode.ERROR
    assert attrs(run)["error.type"] == "ModelError"
    assert [e.name for e in run.events] == ["exception"]
    with pytest.raises(ModelError):
        await agent.run_stream("hi").get_response()
    failed = named(spans, "invoke_agent empty")
    assert len(failed) == 2 and failed[1].status.status_code is StatusCode.ERROR


class _Polite(ChatAgent):
    async def run(self, *args: Any, **kwargs: Any) -> AgentResponse:
        return await super().run(*args, **kwargs)


class _Echo(Agent):
    """Implements only `run`: the inherited `run_stream` calls it."""

    async def run(self, messages: Any = None, **kwargs: Any) -> AgentResponse:
        return AgentResponse([Message("assistant", "echo")], agent_id=self.id)


async def test_a_subclass_calling_its_base_makes_one_span(spans: InMemorySpanExporter) -> None:
    polite = _Polite(ScriptedChatClient(["hello"]), name="polite")
    await polite.run("hi")
    assert children(spans, only(spans, "invoke_agent polite")) == ["chat scripted"]
    spans.clear()
    await _Echo(name="echo").run_stream("hi").get_response()
    assert only(spans, "invoke_agent echo").parent is None


async def test_an_agent_used_as_a_tool_is_a_span_under_the_tool_call(
    spans: InMemorySpanExporter,
) -> None:
    inner = adder("inner")

    def answer(messages: list[Message], options: object) -> object:
        if messages[-1].role != "tool":
            return Message("assistant", [tool_call("inner", {"task": "2+3?"}, call_id="o1")])
        return "done"

    outer = ChatAgent(ScriptedChatClient(answer), name="outer", tools=[inner])
    await outer.run("ask inner")
    outer_run = only(spans, "invoke_agent outer")
    call = only(spans, "execute_tool inner")
    inner_run = only(spans, "invoke_agent inner")
    assert call.parent is not None and call.parent.span_id == outer_run.context.span_id
    assert inner_run.parent is not None and inner_run.parent.span_id == call.context.span_id
    assert children(spans, inner_run) == ["chat scripted", "chat scripted", "execute_tool add"]
    assert len({s.context.trace_id for s in spans.get_finished_spans()}) == 1


async def test_traceparent_round_trips_through_the_w3c_format(
    spans: InMemorySpanExporter,
) -> None:
    with tracing.span("root") as root:
        carried = tracing.traceparent()
    assert carried is not None and carried.startswith("00-")
    child = tracing.start_span("child", parent=carried, links=[carried, "not-a-traceparent"])
    tracing.end_span(child)
    done = only(spans, "child")
    assert done.parent is not None and done.parent.span_id == root.get_span_context().span_id
    assert [link.context.span_id for link in done.links] == [root.get_span_context().span_id]
    orphan = tracing.start_span("orphan", parent="00-garbage")
    tracing.end_span(orphan)
    assert only(spans, "orphan").parent is None  # a bad envelope starts a new trace


def test_while_off_there_is_no_traceparent_and_no_span() -> None:
    assert tracing.traceparent() is None
    assert tracing.start_span("x") is None
    assert tracing.current_span() is None
