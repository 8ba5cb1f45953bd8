"""Which executors' outputs are the workflow's: a terminal agent answers; `output_from=`."""

from __future__ import annotations

import pytest

from cantata.agents import AgentResponse, ChatAgent
from cantata.core import ConfigurationError
from cantata.models import ScriptedChatClient
from cantata.workflows import (
    AgentExecutor,
    WorkflowBuilder,
    WorkflowContext,
    WorkflowValidationError,
    executor,
)


def agent(name: str, reply: str) -> ChatAgent:
    return ChatAgent(ScriptedChatClient(lambda msgs, opts: reply), name=name)


async def test_the_readme_snippet_outputs_the_editors_answer() -> None:
    writer, editor = agent("writer", "a draft"), agent("editor", "the final story")
    write, edit = AgentExecutor(writer), AgentExecutor(editor, context_mode="last_agent")
    workflow = WorkflowBuilder(write).add_edge(write, edit).build()
    result = await workflow.run("a lighthouse keeper in winter")
    [answer] = result.outputs
    assert isinstance(answer, AgentResponse) and answer.text == "the final story"
    streamed = [e async for e in workflow.run_stream("a lighthouse keeper in winter")]
    assert [e.data.text for e in streamed if type(e).__name__ == "OutputEvent"] == [
        "the final story"
    ]


async def test_a_single_agent_workflow_answers() -> None:
    result = await WorkflowBuilder(agent("solo", "hi")).build().run("hello")
    assert [r.text for r in result.outputs] == ["hi"]


async def test_output_response_false_keeps_a_terminal_agent_quiet() -> None:
    quiet = AgentExecutor(agent("quiet", "shh"), output_response=False)
    assert (await WorkflowBuilder(quiet).build().run("hello")).outputs == []


async def test_an_agent_with_out_edges_does_not_answer_by_default() -> None:
    first = agent("first", "one")

    @executor
    def done(response: object, ctx: WorkflowContext[None, str]) -> None:
        ctx.yield_output("done")

    result = await WorkflowBuilder(first).add_edge(first, done).build().run("go")
    assert result.outputs == ["done"]


async def test_output_from_chooses_the_executors_whose_outputs_count() -> None:
    first, second = agent("first", "one"), agent("second", "two")

    @executor
    def tap(response: object, ctx: WorkflowContext[None, str]) -> None:
        ctx.yield_output("tapped")

    wf = (
        WorkflowBuilder(first, output_from=[first])
        .add_edge(first, second)
        .add_edge(first, tap)
        .build()
    )
    result = await wf.run("go")
    assert [r.text for r in result.outputs] == ["one"]  # not second's answer, not tap's
    wf = (
        WorkflowBuilder(first, output_from=["tap", second])
        .add_edge(first, second)
        .add_edge(first, tap)
        .build()
    )
    outputs = (await wf.run("go")).outputs
    assert sorted(o if isinstance(o, str) else o.text for o in outputs) == ["tapped", "two"]


def test_output_from_refuses_an_executor_the_graph_does_not_have() -> None:
    first = agent("first", "one")
    with pytest.raises(WorkflowValidationError, match="nowhere") as caught:
        WorkflowBuilder(first, output_from=["nowhere"]).build()
    assert caught.value.problem == "unknown_output_executor"
    assert caught.value.executor_ids == ("nowhere",)
    assert isinstance(caught.value, ConfigurationError)
    with pytest.raises(WorkflowValidationError, match="not an executor"):
        WorkflowBuilder(first, output_from=[agent("stranger", "x")]).build()
