"""What the compat tests' ``cantata serve`` serves (``tests/compat/_served.py:served``).

``assistant`` is a `ChatAgent` on a scripted model that behaves as a model would for each
kind of request a client library makes: it calls the tools the client declared (each once,
with arguments made from the tool's schema), answers in the JSON schema it was asked for,
and otherwise says which turn of the conversation it is on (``turn N: <last user text>``),
so a test can tell that its client sent the history. ``broken``'s model always fails.
``desk`` is the handoff team of ``tests/teams/_desk.py`` (a follow-up shows who has the
conversation) and ``support`` the agent of ``tests/serve/_refunds.py`` whose tool waits
for a person's approval.
"""

from __future__ import annotations

import json
import runpy
from pathlib import Path
from typing import Any

from cantata.agents import ChatAgent
from cantata.core import FunctionCallContent, FunctionResultContent, Message, ModelError
from cantata.models import ChatOptions, ScriptedChatClient, ToolSpec, tool_call

_FINAL = "final_result"  # pydantic-ai's output tool: called last, after the others


def example(schema: dict[str, Any], defs: dict[str, Any] | None = None) -> Any:
    """A value that fits `schema` (the subset client libraries make from their models)."""
    defs = {**(defs or {}), **schema.get("$defs", {})}
    if "$ref" in schema:
        return example(defs[schema["$ref"].rsplit("/", 1)[-1]], defs)
    for key in ("anyOf", "oneOf", "allOf"):
        if key in schema:
            return example(schema[key][0], defs)
    if "enum" in schema:
        return schema["enum"][0]
    if "const" in schema:
        return schema["const"]
    kind = schema.get("type", "object")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object":
        props = schema.get("properties", {})
        return {name: example(sub, defs) for name, sub in props.items()}
    samples: dict[str, Any] = {
        "string": "Oslo",
        "integer": 3,
        "number": 1.5,
        "boolean": True,
        "array": [],
        "null": None,
    }
    return samples.get(kind, "Oslo")


def _model(messages: list[Message], options: ChatOptions) -> Any:
    called = {c.name for m in messages for c in m.contents if type(c) is FunctionCallContent}
    results = [str(c.result) for c in messages[-1].contents if type(c) is FunctionResultContent]
    tools: list[ToolSpec] = [] if options.tool_choice == "none" else list(options.tools or ())
    if options.tool_choice not in (None, "auto", "none", "required"):
        tools = [t for t in tools if t.name == options.tool_choice]
    pending = [t for t in tools if t.name not in called]
    pending.sort(key=lambda t: t.name.startswith(_FINAL))  # the output tool last
    if pending and (not results or pending[0].name.startswith(_FINAL)):
        tool = pending[0]
        return tool_call(tool.name, example(tool.parameters), call_id=f"call_{len(called)}")
    if options.response_format is not None:
        fmt = options.response_format
        schema = fmt if isinstance(fmt, dict) else fmt.model_json_schema()
        return json.dumps(example(schema))
    if results:
        return "the tool said: " + "; ".join(results)
    users = [m for m in messages if m.role == "user"]
    return f"turn {len(users)}: {users[-1].text if users else ''}"


def _fails(messages: list[Message], options: ChatOptions) -> str:
    raise ModelError("the model server is down")


served: dict[str, Any] = {
    "assistant": ChatAgent(
        ScriptedChatClient(_model, chunk_size=3), name="assistant", description="Scripted."
    ),
    "broken": ChatAgent(ScriptedChatClient(_fails), name="broken"),
}
_TESTS = Path(__file__).resolve().parents[1]
served["desk"] = runpy.run_path(str(_TESTS / "teams" / "_desk.py"))["make_desk"]()
served["support"] = runpy.run_path(str(_TESTS / "serve" / "_refunds.py"))["make_support"]()
