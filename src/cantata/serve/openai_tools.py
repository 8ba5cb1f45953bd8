"""Tools a client sends with a request (chat ``tools``, Responses ``tools`` of type
``function``): declared to the served agent's model for that request only.

They join the agent's own tools as tools declared without a function (see
`FunctionInvokingChatClient`): the agent's tools still run on the server, and when the model
calls one of the client's, the run stops with finish reason ``tool_calls`` and the answer
carries the call for the client to run. The client's next request brings the result (a
``tool`` message, a ``function_call_output`` item) after the call, in the history it sends or
in the thread ``previous_response_id`` names, and the run goes on from there. Nothing is
held in the server's memory between the two requests, so any worker answers the second,
after a restart too.

Only a served agent (a `ChatAgent`) takes client tools: a team's or a workflow's agents
answer one another, and a call meant for the client has no way out of them, so a request
with tools for one is refused with a 400 that says so.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ..agents import AgentResponse, ChatAgent
from ..core import FunctionCallContent, short_repr
from ..models import ChatOptions, ToolSpec
from .errors import RequestError
from .served import Served

__all__ = ["ClientTools", "arguments_text", "client_tools"]

Api = Literal["chat", "responses"]
_MAX_TOOLS = 128
_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
_CHOICES = ("auto", "none", "required")
_RESERVED = frozenset({"request_info"})  # the call a workflow's request for input is
_EMPTY_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}


@dataclass(frozen=True, slots=True)
class ClientTools:
    """The tools one request declared, and its ``tool_choice`` (None: the model decides)."""

    specs: tuple[ToolSpec, ...] = ()
    choice: str | None = None

    @property
    def names(self) -> frozenset[str]:
        """The names of the declared tools."""
        return frozenset(s.name for s in self.specs)

    def run_options(self) -> dict[str, Any]:
        """The run keywords that declare the tools and set the choice (none without either)."""
        out: dict[str, Any] = {}
        if self.specs:
            out["options"] = ChatOptions(tools=list(self.specs))
        if self.choice is not None:
            out["tool_choice"] = self.choice
        return out

    def calls(self, response: AgentResponse) -> list[FunctionCallContent]:
        """The calls of the client's tools the run stopped at (none when it answered)."""
        if response.finish_reason != "tool_calls" or not self.specs:
            return []
        names = self.names
        out: list[FunctionCallContent] = []
        messages = list(response.messages)
        while messages and messages[-1].role == "tool":  # results of the agent's own calls
            messages.pop()
        for message in reversed(messages):
            if message.role != "assistant":
                break
            found = [c for c in message.contents if type(c) is FunctionCallContent]
            out[:0] = [c for c in found if c.name in names]
        return out


def arguments_text(call: FunctionCallContent) -> str:
    """A call's arguments as the JSON text OpenAI's wire carries."""
    if isinstance(call.arguments, str):
        return call.arguments
    return json.dumps(call.arguments, ensure_ascii=False, default=str)


def client_tools(body: dict[str, Any], entry: Served, api: Api) -> ClientTools:
    """The request's ``tools`` and ``tool_choice``, checked against what `entry` is; every
    mistake is a 400 naming the field."""
    raw = body.get("tools")
    if raw is not None and type(raw) is not list:
        raise RequestError("'tools' must be a list of tools", param="tools")
    specs = tuple(_spec(t, f"tools[{i}]", api) for i, t in enumerate(raw or ()))
    choice = _choice(body.get("tool_choice"))
    if len(specs) > _MAX_TOOLS:
        raise RequestError(f"at most {_MAX_TOOLS} tools per request", param="tools")
    names = [s.name for s in specs]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise RequestError(f"two tools are named {twice[0]!r}; name each once", param="tools")
    if entry.kind != "agent" or not isinstance(entry.agent, ChatAgent):
        _refuse_for(entry, specs, choice)
        return ClientTools()
    own = {t.name for t in entry.agent.tools}
    clash = sorted(own & set(names) | _RESERVED & set(names))
    if clash:
        raise RequestError(
            f"the tool name {clash[0]!r} is taken: {entry.name!r} has a tool of its own by "
            "that name (or the server uses it); rename yours",
            param="tools",
        )
    offered = own | set(names)
    if choice == "required" and not offered:
        raise RequestError(
            "tool_choice 'required' needs tools, and none are offered: send 'tools' or drop "
            "tool_choice",
            param="tool_choice",
        )
    if choice is not None and choice not in _CHOICES and choice not in offered:
        listed = ", ".join(repr(n) for n in sorted(offered)) or "none"
        raise RequestError(
            f"tool_choice names the tool {choice!r}, which is not offered (tools: {listed})",
            param="tool_choice",
        )
    return ClientTools(specs, choice)


def _refuse_for(entry: Served, specs: Sequence[ToolSpec], choice: str | None) -> None:
    what = (
        f"a {entry.kind}"
        if entry.kind != "agent"
        else f"an agent of kind {type(entry.agent).__name__}"
    )
    if specs:
        raise RequestError(
            f"{entry.name!r} is {what}, which cannot take tools from the client (its agents "
            "run their own tools on the server); send the conversation without 'tools'",
            param="tools",
        )
    if choice not in (None, "auto"):
        raise RequestError(
            f"tool_choice {choice!r} cannot apply to {entry.name!r}, which is {what} that "
            "takes no tools from the client; leave tool_choice out",
            param="tool_choice",
        )


def _spec(tool: Any, where: str, api: Api) -> ToolSpec:
    if type(tool) is not dict:
        raise RequestError(f"{where} must be an object", param=where)
    kind = tool.get("type", "function")
    if kind != "function":
        raise RequestError(
            f"{where}.type {short_repr(kind)} is not supported: this server takes function "
            "tools only (the served agent's own tools run on the server)",
            param=f"{where}.type",
        )
    # chat nests the function ({"type": "function", "function": {...}}); Responses does not
    fields = tool.get("function") if api == "chat" or "function" in tool else tool
    if type(fields) is not dict:
        raise RequestError(f"{where}.function must be an object", param=f"{where}.function")
    name = fields.get("name")
    if type(name) is not str or not _NAME.fullmatch(name):
        raise RequestError(
            f"{where} needs a name of 1 to 64 letters, digits, '_' or '-', got "
            f"{short_repr(name, 60)}",
            param=f"{where}.name",
        )
    description = fields.get("description") or ""
    if type(description) is not str:
        raise RequestError(f"{where}.description must be a string", param=f"{where}.description")
    parameters = fields.get("parameters")
    if parameters is None:
        parameters = dict(_EMPTY_SCHEMA)
    elif type(parameters) is not dict:
        raise RequestError(
            f"{where}.parameters must be a JSON schema object", param=f"{where}.parameters"
        )
    return ToolSpec(name, description, parameters)


def _choice(value: Any) -> str | None:
    if value is None:
        return None
    if type(value) is str:
        if value not in _CHOICES:
            raise RequestError(
                f"tool_choice must be 'auto', 'none', 'required' or a function, got "
                f"{short_repr(value, 40)}",
                param="tool_choice",
            )
        return value
    if type(value) is dict and value.get("type") == "function":
        # chat: {"type": "function", "function": {"name": ...}}; Responses: {"type", "name"}
        inner = value.get("function")
        name = inner.get("name") if type(inner) is dict else value.get("name")
        if type(name) is str and name:
            return name
    raise RequestError(
        "tool_choice must be 'auto', 'none', 'required' or "
        '{"type": "function", "function": {"name": ...}}, got ' + short_repr(value, 60),
        param="tool_choice",
    )
