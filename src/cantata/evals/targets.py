"""One call shape for whatever an eval runs: an agent, a team, a workflow, or a function.

Each kind is read where it says most: an agent's `AgentResponse` (its messages, tool calls
included, its usage and structured value); a team's `TaskResult` with its routing
decisions, and the session's usage; a workflow's outputs and the `AgentResponseEvent`s of
the agents inside it (their tool calls and usage). Every case runs afresh: an agent on a
new thread, a team in a new session, a workflow in a new run, so cases run concurrently
without sharing a conversation.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, TypeAlias

from ..agents import Agent, AgentResponse
from ..core import ConfigurationError, FunctionCallContent, Message, Usage
from ..teams import RoutingEvent, TaskResult, Team
from ..workflows import AgentResponseEvent, Workflow
from .context import RunOutcome, ToolCall

__all__ = ["Target", "as_target", "target_name"]

Target: TypeAlias = Agent | Team | Workflow | Callable[[Any], Any]
"""What `evaluate` runs: an agent, a team, a workflow, or a function of the case's input
(sync or async) whose answer is read like a workflow output."""

Runner: TypeAlias = Callable[[Any], Awaitable[RunOutcome]]


def target_name(target: Target) -> str:
    """The name a report gives the target."""
    name = getattr(target, "name", None)
    if isinstance(name, str) and name:
        return name
    return getattr(target, "__qualname__", None) or type(target).__name__


def as_target(target: Target) -> Runner:
    """The coroutine function that runs `target` on one case's input."""
    if isinstance(target, Agent):
        return _agent_runner(target)
    if isinstance(target, Team):
        return _team_runner(target)
    if isinstance(target, Workflow):
        return _workflow_runner(target)
    if callable(target):
        return _function_runner(target)
    raise ConfigurationError(
        f"cannot evaluate {type(target).__name__}: give an agent, a team, a workflow, or a "
        "function of the case's input"
    )


def conversation(value: Any) -> str | list[str | Message]:
    """A case's input as an agent or a team takes it: text as it is; a message
    (``{"role": ..., "content": ...}``) or a list of them as messages; other data as JSON
    text."""
    if isinstance(value, str):
        return value
    if _is_message(value):
        return [_message(value)]
    if isinstance(value, list) and value and all(_is_message(m) for m in value):
        return list[str | Message]([_message(m) for m in value])
    return json.dumps(value, ensure_ascii=False)


def _is_message(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and set(value) <= {"role", "content", "name"}
        and isinstance(value.get("role"), str)
        and isinstance(value.get("content"), str)
    )


def _message(value: dict[str, Any]) -> Message:
    return Message(value["role"], value["content"], author_name=value.get("name"))


def _calls(messages: Iterable[Message]) -> list[ToolCall]:
    out = []
    for m in messages:
        for c in m.contents:
            if type(c) is FunctionCallContent:
                args = c.arguments
                out.append(ToolCall(c.name, args if isinstance(args, dict) else {"_raw": args}))
    return out


def _from_response(response: AgentResponse) -> RunOutcome:
    messages = response.messages
    return RunOutcome(
        output=response.text,
        value=response.value,
        messages=messages,
        tool_calls=_calls(messages),
        usage=response.usage or Usage(),
    )


def _agent_runner(agent: Agent) -> Runner:
    async def run(value: Any) -> RunOutcome:
        return _from_response(await agent.run(conversation(value)))

    return run


def _team_runner(team: Team) -> Runner:
    async def run(value: Any) -> RunOutcome:
        session = team.create_session()
        try:
            result = await session.run(conversation(value), include_routing=True)
            usage = session.usage
        finally:
            await session.close()
        return _from_task_result(result, usage)

    return run


def _from_task_result(result: TaskResult, usage: Usage) -> RunOutcome:
    replies = [m for m in result.messages if m.role == "assistant"]  # not the task
    stop = result.stop_message
    return RunOutcome(
        output=replies[-1].text if replies else "",
        messages=result.messages,
        tool_calls=_calls(replies),
        routing=list(result.routing),
        stop_source=stop.source if stop is not None else None,
        usage=usage,
    )


def _workflow_runner(workflow: Workflow) -> Runner:
    async def run(value: Any) -> RunOutcome:
        result = await workflow.run(value, include_events=True)
        messages: list[Message] = []
        usage = Usage()
        routing: list[RoutingEvent] = []
        for event in result.events:
            if isinstance(event, AgentResponseEvent) and isinstance(event.data, AgentResponse):
                messages.extend(event.data.messages)
                if event.data.usage is not None:
                    usage = usage + event.data.usage
            elif isinstance(event, RoutingEvent):
                routing.append(event)
        outcome = _from_output(result.outputs[-1] if result.outputs else None)
        outcome.messages = messages or outcome.messages
        outcome.tool_calls = _calls(messages) or outcome.tool_calls
        outcome.usage = usage + outcome.usage
        outcome.routing = routing or outcome.routing
        return outcome

    return run


def _from_output(output: Any) -> RunOutcome:
    """A run's answer, whatever it is: an agent's response, a team's result, text, data."""
    if isinstance(output, RunOutcome):
        return output
    if isinstance(output, AgentResponse):
        return _from_response(output)
    if isinstance(output, TaskResult):
        return _from_task_result(output, Usage())
    if isinstance(output, Message):
        return RunOutcome(output=output.text, messages=[output], tool_calls=_calls([output]))
    if isinstance(output, str):
        return RunOutcome(output=output)
    if output is None:
        return RunOutcome()
    try:
        text = json.dumps(output, ensure_ascii=False, default=_plain)
    except (TypeError, ValueError):
        text = str(output)
    return RunOutcome(output=text, value=output)


def _plain(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json")
    raise TypeError(type(value).__name__)


def _function_runner(fn: Callable[[Any], Any]) -> Runner:
    async def run(value: Any) -> RunOutcome:
        answer = fn(value)
        if inspect.isawaitable(answer):
            answer = await answer
        return _from_output(answer)

    return run
