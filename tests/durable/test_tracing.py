"""OpenTelemetry: off by default; once configured, a workflow run with a tool-calling
agent makes one trace: workflow > superstep > executor > invoke_agent > chat /
execute_tool spans with GenAI attributes (agent, model, token usage, tool name and call
id)."""

from __future__ import annotations

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from cantata.agents import ChatAgent
from cantata.core import Usage, tracing
from cantata.models import ScriptedChatClient
from cantata.workflows import WorkflowBuilder

from .test_tracing_agents import adder


async def test_a_run_is_one_trace_of_nested_spans(spans: InMemorySpanExporter) -> None:
    agent = adder()
    result = await WorkflowBuilder(agent, name="sums").build().run("2+3?")
    assert [r.text for r in result.outputs] == ["the sum is five, as asked"]
    found = {s.name: s for s in spans.get_finished_spans()}
    run, step = found["workflow sums"], found["superstep 1"]
    executor = found["executor adder"]
    run_span = found["invoke_agent adder"]
    tool_span = found["execute_tool add"]
    chats = [s for s in spans.get_finished_spans() if s.name.startswith("chat")]
    assert len(chats) == 2
    assert len({s.context.trace_id for s in spans.get_finished_spans()}) == 1
    assert step.parent is not None and step.parent.span_id == run.context.span_id
    assert executor.parent is not None and executor.parent.span_id == step.context.span_id
    assert run_span.parent is not None and run_span.parent.span_id == executor.context.span_id
    for child in [*chats, tool_span]:
        assert child.parent is not None and child.parent.span_id == run_span.context.span_id
    assert run_span.attributes is not None
    assert run_span.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert run_span.attributes["gen_ai.agent.name"] == "adder"
    assert run_span.attributes["gen_ai.agent.id"] == agent.id
    # the run's two model calls, summed
    assert run_span.attributes["gen_ai.usage.input_tokens"] == 20
    assert run_span.attributes["gen_ai.usage.output_tokens"] == 8
    assert run.attributes is not None and run.attributes["cantata.run_id"] == result.run_id
    assert chats[0].attributes is not None
    assert chats[0].attributes["gen_ai.operation.name"] == "chat"
    assert chats[0].attributes["gen_ai.request.model"] == "scripted"
    assert chats[0].attributes["gen_ai.usage.input_tokens"] == 10
    assert chats[0].attributes["gen_ai.usage.output_tokens"] == 4
    assert tool_span.attributes is not None
    assert tool_span.attributes["gen_ai.tool.call.id"] == "c1"


async def test_without_configure_no_span_is_made() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    # a provider that exists but was not given to cantata sees nothing
    await WorkflowBuilder(adder()).build().run("2+3?")
    assert not tracing.enabled() and exporter.get_finished_spans() == ()
    provider.shutdown()


async def test_a_workflow_calling_two_agents_is_one_trace(spans: InMemorySpanExporter) -> None:
    first = adder()
    second = ChatAgent(ScriptedChatClient(["checked"], usage=Usage(5, 1)), name="checker")
    result = await WorkflowBuilder(first, name="pair").add_edge(first, second).build().run("2+3?")
    assert [r.text for r in result.outputs] == ["checked"]
    finished = spans.get_finished_spans()
    assert len({s.context.trace_id for s in finished}) == 1
    by_id = {s.context.span_id: s for s in finished}
    run = next(s for s in finished if s.name == "workflow pair")
    for name, executor in (
        ("invoke_agent adder", "executor adder"),
        ("invoke_agent checker", "executor checker"),
    ):
        agent_span = next(s for s in finished if s.name == name)
        assert agent_span.parent is not None
        executor_span = by_id[agent_span.parent.span_id]
        assert executor_span.name == executor and executor_span.parent is not None
        # up the chain from the executor: its superstep, then the workflow run
        step = by_id[executor_span.parent.span_id]
        assert step.name.startswith("superstep") and step.parent is not None
        assert step.parent.span_id == run.context.span_id
