"""Adapters of the remote agents: `ResponsesAgent` (the Responses API) and `A2AAgent`.

A config names the server (its base URL) and the agent's settings; the agent loaded from it
makes and owns its own HTTP client. The server's key or token is a secret: left out, or
with ``include_secrets`` written as ``${Env:OPENAI_API_KEY}`` (Responses) or
``${Env:CANTATA_A2A_TOKEN}`` (A2A), never its value. An agent given a client of yours is
written by that client's base URL, timeout and key (not its other settings).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from ..agents import A2AAgent, ResponsesAgent
from ..core import CantataError
from ._builtin_models import _fields, _typed
from .errors import SpecError
from .registry import ComponentAdapter, ConfigContext, register_component

__all__: list[str] = []

_RESPONSES = "cantata.agents.ResponsesAgent"
_A2A = "cantata.agents.A2AAgent"
RESPONSES_KEY_ENV = "OPENAI_API_KEY"
A2A_TOKEN_ENV = "CANTATA_A2A_TOKEN"
_NO_KEY = "unused"  # what ResponsesAgent gives its client when no key is set


def _dump_responses(agent: ResponsesAgent, ctx: ConfigContext) -> dict[str, Any]:
    client = agent._client  # the agent's client, read-only: its URL, timeout and key
    out: dict[str, Any] = {
        "base_url": str(client.base_url).rstrip("/"),
        "model": agent.model,
        "name": agent.name,
        "description": agent.description,
        "instructions": agent.instructions,
        "store": agent.store,
    }
    if isinstance(client.timeout, int | float):
        out["timeout"] = float(client.timeout)
    if ctx.include_secrets and client.api_key and client.api_key != _NO_KEY:
        out["api_key"] = "${Env:" + RESPONSES_KEY_ENV + "}"
    return out


def _build_responses(config: Mapping[str, Any], ctx: ConfigContext) -> ResponsesAgent:
    names = {"base_url", "model", "name", "description", "instructions", "store", "api_key",
             "timeout"}  # fmt: skip
    args = _fields(config, names, _RESPONSES, required={"base_url", "model"})
    _typed(args, {"base_url": str, "model": str, "name": str, "description": str}, _RESPONSES)
    _typed(args, {"instructions": str, "store": bool, "api_key": str}, _RESPONSES)
    _typed(args, {"timeout": float}, _RESPONSES)
    base_url = args.pop("base_url")
    bad = f"{_RESPONSES}: base_url {base_url!r:.120} is not an http(s) URL"
    try:
        host = urlsplit(base_url).hostname
    except ValueError as exc:
        raise SpecError(f"{bad}: {exc}") from exc
    if not base_url.startswith(("http://", "https://")) or not host:
        raise SpecError(bad)
    try:
        return ResponsesAgent(base_url, **{k: v for k, v in args.items() if v is not None})
    except CantataError:
        raise
    except Exception as exc:  # the client's own URL parser and its own error classes
        raise SpecError(f"{bad}: {exc}") from exc


def _dump_a2a(agent: A2AAgent, ctx: ConfigContext) -> dict[str, Any]:
    out: dict[str, Any] = {
        "url": agent.url,
        "name": agent.name,
        "description": agent.description,
        "timeout": agent._timeout,  # the agent's setting, read-only
    }
    if ctx.include_secrets and agent._token:
        out["token"] = "${Env:" + A2A_TOKEN_ENV + "}"
    return out


def _build_a2a(config: Mapping[str, Any], ctx: ConfigContext) -> A2AAgent:
    args = _fields(config, {"url", "name", "description", "token", "timeout"}, _A2A,
                   required={"url"})  # fmt: skip
    _typed(args, {"url": str, "name": str, "description": str, "token": str}, _A2A)
    _typed(args, {"timeout": float}, _A2A)
    return A2AAgent(args.pop("url"), **{k: v for k, v in args.items() if v is not None})


register_component(
    ComponentAdapter(_RESPONSES, "agent", ResponsesAgent, _dump_responses, _build_responses)
)
register_component(ComponentAdapter(_A2A, "agent", A2AAgent, _dump_a2a, _build_a2a))
