"""A workflow run's kwargs reach the tools of its agents (as `tool_kwargs`), now that
`run` refuses keyword arguments that are no chat option."""

from __future__ import annotations

from cantata.agents import ChatAgent
from cantata.models import ScriptedChatClient, tool_call
from cantata.tools import ToolContext, tool
from cantata.workflows import AgentExecutor, WorkflowBuilder


async def test_workflow_kwargs_reach_the_agent_tools() -> None:
    seen: list[dict[str, object]] = []

    @tool
    def whoami(context: ToolContext) -> str:
        """Who asks."""
        seen.append(dict(context.kwargs))
        return "ok"

    agent = ChatAgent(ScriptedChatClient([[tool_call("whoami")], "done"]), name="a", tools=[whoami])
    workflow = WorkflowBuilder(AgentExecutor(agent)).build()
    await workflow.run("who?", kwargs={"user_id": 7})
    assert seen == [{"user_id": 7}]
