"""Structured output a client asks for: chat ``response_format``, Responses ``text.format``.

A JSON schema (``json_schema``) or any JSON object (``json_object``) becomes the served
agent's ``response_format`` for the request, so it reaches the model call: the embedded
model constrains its output by a grammar made from the schema (its answer always parses),
an OpenAI-compatible model server gets it as its own ``response_format``, and the agent
checks the answer against it (a misfit is the run's error, not a reply that fails later in
the client's parser). The answer's text is then the final message's JSON alone; streamed,
it comes in one piece at the end.

Only a served `ChatAgent` makes its model call with the request's options; a team, a
workflow or another kind of agent refuses a format with a 400 saying so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from ..agents import AgentResponse, ChatAgent
from ..core import short_repr
from .errors import RequestError
from .served import Served

__all__ = ["OutputFormat", "output_format"]

Api = Literal["chat", "responses"]
_ANY_OBJECT: dict[str, Any] = {"type": "object"}


@dataclass(frozen=True, slots=True)
class OutputFormat:
    """The request's format: ``text`` (none asked for), or a JSON schema to answer in."""

    kind: Literal["text", "json_schema", "json_object"] = "text"
    name: str | None = None
    schema: dict[str, Any] | None = None
    strict: bool | None = None

    @property
    def whole(self) -> bool:
        """A streamed answer goes out whole at the end: a run's earlier messages (said
        before its tool calls) are not part of the JSON, and cannot be taken back."""
        return self.schema is not None

    def run_options(self) -> dict[str, Any]:
        """The run keyword that asks the agent for this format (none for text)."""
        if self.schema is None:
            return {}
        schema = self.schema if "title" in self.schema else {**self.schema, "title": self.name}
        return {"response_format": schema}

    def answer(self, response: AgentResponse, text: str) -> str:
        """What the client reads: `text`, or with a format, the last answer's JSON alone
        (earlier messages of the run, said before its tool calls, would not parse)."""
        if self.schema is None:
            return text
        answers = [m for m in response.messages if m.role == "assistant" and m.text]
        return answers[-1].text if answers else text

    def to_json(self) -> dict[str, Any]:
        """The format as a Responses body's ``text.format`` shows it."""
        if self.kind != "json_schema":
            return {"type": self.kind}
        return {
            "type": "json_schema",
            "name": self.name,
            "schema": self.schema,
            "strict": self.strict,
        }


def output_format(body: dict[str, Any], entry: Served, api: Api) -> OutputFormat:
    """The request's structured output format, checked; every mistake is a 400."""
    if api == "chat":
        raw, param = body.get("response_format"), "response_format"
    else:
        text = body.get("text")
        if text is not None and type(text) is not dict:
            raise RequestError("'text' must be an object", param="text")
        raw, param = (text or {}).get("format"), "text.format"
    fmt = _read(raw, param, nested=api == "chat")
    if fmt.kind != "text" and not (entry.kind == "agent" and isinstance(entry.agent, ChatAgent)):
        what = f"a {entry.kind}" if entry.kind != "agent" else type(entry.agent).__name__
        raise RequestError(
            f"{param} {fmt.kind} cannot be honoured by {entry.name!r} ({what}): only a served "
            "ChatAgent makes its model call with the request's format; ask for JSON in the "
            "messages instead, or leave it out",
            param=param,
        )
    return fmt


def _read(raw: Any, param: str, *, nested: bool) -> OutputFormat:
    if raw is None:
        return OutputFormat()
    if type(raw) is not dict:
        raise RequestError(f"'{param}' must be an object", param=param)
    kind = raw.get("type")
    if kind == "text":
        return OutputFormat()
    if kind == "json_object":
        return OutputFormat("json_object", "json_object", dict(_ANY_OBJECT))
    if kind != "json_schema":
        raise RequestError(
            f"{param}.type must be text, json_object or json_schema, got {short_repr(kind, 40)}",
            param=f"{param}.type",
        )
    # chat nests the schema ({"type": "json_schema", "json_schema": {...}}); Responses not
    fields = raw.get("json_schema") if nested else raw
    where = f"{param}.json_schema" if nested else param
    if type(fields) is not dict:
        raise RequestError(f"{where} must be an object", param=where)
    name, schema, strict = fields.get("name"), fields.get("schema"), fields.get("strict")
    if type(name) is not str or not 0 < len(name) <= 64:
        raise RequestError(f"{where}.name must be a name of 1 to 64 characters", param=where)
    if type(schema) is not dict:
        raise RequestError(f"{where}.schema must be a JSON schema object", param=where)
    if strict is not None and type(strict) is not bool:
        raise RequestError(f"{where}.strict must be true or false", param=where)
    return OutputFormat("json_schema", name, schema, strict)
