"""An agent as a tool of another agent (a triage agent calling specialists).

Each call runs the agent on a fresh thread: the calling agent's conversation already holds
the call and its result, and the specialist must not carry one caller's state into
another's call. The caller's cancellation token and tool keyword arguments flow through.
"""

from __future__ import annotations

import inspect
import keyword
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import Field

from ..core import ConfigurationError, ToolError
from ..tools import FunctionTool, ToolContext
from .response import AgentResponse

if TYPE_CHECKING:
    from .agent import Agent

__all__ = ["agent_as_tool"]

_CONTEXT = "_tool_context"
_OVERRIDE = "instructions_override"
_OVERRIDE_TYPE = Annotated[
    str | None,
    Field(
        description="Instructions that replace the agent's own for this call only; "
        "leave out to keep them."
    ),
]
_UNANSWERABLE = frozenset({"approval_required", "tool_calls"})


def agent_as_tool(
    agent: Agent,
    *,
    name: str | None = None,
    description: str | None = None,
    arg_name: str = "task",
    arg_description: str | None = None,
    stream_callback: Callable[[Any], Any] | None = None,
    allow_instructions_override: bool = False,
) -> FunctionTool:
    """A `FunctionTool` that runs `agent` with its one text argument and returns the text
    of its answer. `stream_callback` (optional) sees each streamed update of the run.

    With `allow_instructions_override`, the tool also takes an optional
    ``instructions_override`` argument: the calling model may replace the agent's
    instructions for that one call. Off by default: it lets one model rewrite another's
    role, which the developer should choose."""
    reserved = (_CONTEXT, _OVERRIDE) if allow_instructions_override else (_CONTEXT,)
    if not arg_name.isidentifier() or keyword.iskeyword(arg_name) or arg_name in reserved:
        raise ConfigurationError(
            f"as_tool of agent `{agent.name}`: arg_name {arg_name!r} must be a Python "
            f"identifier other than {', '.join(map(repr, reserved))} (it becomes the "
            "tool's parameter)"
        )
    text = arg_description or "The question to hand over, in the user's own words."

    async def call_agent(**values: Any) -> str:
        context: ToolContext = values.pop(_CONTEXT)
        task: str = values[arg_name]
        # only what is given is passed: an agent of another kind may take **kwargs only
        passed: dict[str, Any] = {}
        if context.kwargs:
            passed["tool_kwargs"] = dict(context.kwargs)
        if values.get(_OVERRIDE):
            passed["instructions_override"] = values[_OVERRIDE]
        token = context.cancellation_token
        response: AgentResponse
        if stream_callback is None:
            response = await agent.run(task, cancellation_token=token, **passed)
        else:
            stream = agent.run_stream(task, cancellation_token=token, **passed)
            async for update in stream:
                result = stream_callback(update)
                if inspect.isawaitable(result):
                    await result
            response = stream.response
        if response.finish_reason in _UNANSWERABLE:
            # The specialist stopped to wait for something only its caller could give; as a
            # tool its thread is gone after this call, so its empty text would read to the
            # calling model as an answer. Say what happened instead.
            pending = ", ".join(
                sorted({c.function_call.name for c in response.user_input_requests})
            )
            raise ToolError(
                f"agent `{agent.name}` stopped before answering (finish reason "
                f"{response.finish_reason!r}{f', waiting on {pending}' if pending else ''}): "
                "a tool call of an agent used as a tool cannot be approved or run by the caller"
            )
        return response.text

    annotation = Annotated[str, Field(description=text)]
    keyword_only = inspect.Parameter.KEYWORD_ONLY
    params = [inspect.Parameter(arg_name, keyword_only, annotation=annotation)]
    annotations: dict[str, Any] = {arg_name: annotation}
    if allow_instructions_override:
        params.append(
            inspect.Parameter(_OVERRIDE, keyword_only, annotation=_OVERRIDE_TYPE, default=None)
        )
        annotations[_OVERRIDE] = _OVERRIDE_TYPE
    params.append(inspect.Parameter(_CONTEXT, keyword_only, annotation=ToolContext))
    annotations.update({_CONTEXT: ToolContext, "return": str})
    call_agent.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        params, return_annotation=str
    )
    call_agent.__annotations__ = annotations
    return FunctionTool(
        name or agent.name,
        description or agent.description or f"Ask the agent `{agent.name}`.",
        func=call_agent,
    )
