"""Adapters of agents, tools and history reducers."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..agents import ChatAgent, SummarizingReducer, TruncatingReducer
from ..core import RetryPolicy
from ..tools import FunctionTool
from ._builtin_guardrails import (
    DATA_ATTR,
    guardrails_from_data,
    limits_from_data,
    limits_to_data,
)
from ._builtin_memory import LEARN_ATTR
from ._builtin_models import _fields, _typed
from .errors import SpecError
from .options import options_from_data, options_to_data
from .registry import ComponentAdapter, ConfigContext, _dump, build, register_component
from .tool_refs import resolve_tool, tool_id

__all__: list[str] = []


def _dump_tool(t: FunctionTool, ctx: ConfigContext) -> dict[str, Any]:
    return {"id": tool_id(t), "name": t.name}


def _build_tool(config: Mapping[str, Any], ctx: ConfigContext) -> FunctionTool:
    where = "cantata.tools.FunctionTool"
    args = _fields(config, {"id", "name"}, where)
    found = resolve_tool(args.get("id"), ctx, where=where)  # type: ignore[arg-type]
    name = args.get("name")
    if name is not None and name != found.name:
        _typed(args, {"name": str}, where)
        return FunctionTool(
            name, found.description, func=found.func, approval_mode=found.approval_mode
        )
    return found


def _dump_agent(agent: ChatAgent, ctx: ConfigContext) -> dict[str, Any]:
    where = f"agent {agent.name!r}"
    out: dict[str, Any] = {
        "name": agent.name,
        "description": agent.description,
        "instructions": agent.instructions,
        "arguments": dict(agent.arguments),
        "client": _dump(agent.client, ctx),
        "tools": [_dump(t, ctx) for t in agent.tools],
        "options": options_to_data(agent.options, where=where),
    }
    if agent.history_reducer is not None:
        out["history_reducer"] = _dump(agent.history_reducer, ctx)
    out["max_iterations"] = agent.max_iterations
    if agent.retry_policy is not None:
        out["retry_policy"] = _retry_to_data(agent.retry_policy)
    if agent.context_providers:  # written only when set: older configs stay the same
        out["context_providers"] = [_dump(p, ctx) for p in agent.context_providers]
    if agent.answer_with_tool_results:  # written only when set: older configs stay the same
        out["answer_with_tool_results"] = True
        out["tool_results_format"] = agent.tool_results_format
    if agent.guardrails:
        data = getattr(agent, DATA_ATTR, None)
        if data is None:
            raise SpecError(
                f"{where}: its guardrails were made in code and have no config; build the "
                "agent from a spec or config that names them to dump it"
            )
        out["guardrails"] = data
    if agent.usage_limits:
        out["usage_limits"] = limits_to_data(agent.usage_limits)
    return out


_RETRY_FIELDS = {"attempts": int, "initial_delay": float, "max_delay": float,
                 "multiplier": float, "jitter": float, "retry_on": list}  # fmt: skip


def _retry_to_data(policy: RetryPolicy) -> dict[str, Any]:
    """A retry policy as plain data (its fields; `retry_on` as a sorted list)."""
    data = {k: getattr(policy, k) for k in _RETRY_FIELDS}
    data["retry_on"] = sorted(policy.retry_on)
    return data


def _retry_from_data(data: Any, where: str) -> RetryPolicy:
    if not isinstance(data, Mapping):
        raise SpecError(f"{where}: 'retry_policy' must be a mapping of {sorted(_RETRY_FIELDS)}")
    args = _fields(data, set(_RETRY_FIELDS), f"{where}.retry_policy")
    _typed(args, _RETRY_FIELDS, f"{where}.retry_policy")
    return RetryPolicy(**args)


_AGENT_FIELDS = {
    "name", "description", "instructions", "arguments", "client", "tools", "options",
    "history_reducer", "max_iterations", "retry_policy", "answer_with_tool_results",
    "tool_results_format", "context_providers", "guardrails", "usage_limits",
}  # fmt: skip


def _build_agent(config: Mapping[str, Any], ctx: ConfigContext) -> ChatAgent:
    name = config.get("name", "agent")
    where = f"agent {name!r}"
    args = _fields(config, _AGENT_FIELDS, where)
    _typed(args, {"name": str, "description": str, "instructions": str}, where)
    _typed(args, {"max_iterations": int, "arguments": dict, "tools": list}, where)
    _typed(args, {"answer_with_tool_results": bool, "tool_results_format": str}, where)
    if "client" not in args:
        raise SpecError(f"{where}: a model client config is needed under 'client'")
    client = build(args.pop("client"), ctx, where=f"{where}.client")
    tools = [
        build(t, ctx, where=f"{where}.tools[{i}]") for i, t in enumerate(args.pop("tools", []))
    ]
    reducer = args.pop("history_reducer", None)
    retry = args.pop("retry_policy", None)
    found = args.pop("context_providers", [])
    if not isinstance(found, list):
        raise SpecError(f"{where}: 'context_providers' must be a list of provider configs")
    providers = [
        build(p, ctx, where=f"{where}.context_providers[{i}]") for i, p in enumerate(found)
    ]
    for provider in providers:
        if getattr(provider, LEARN_ATTR, False):
            provider.extractor = client  # learns with the agent's own model
    guard_data = args.pop("guardrails", None)
    guardrails = (
        guardrails_from_data(guard_data, ctx, client=client, where=where)
        if guard_data is not None
        else []
    )
    found_limits = args.pop("usage_limits", None)
    limits = limits_from_data(found_limits, where=where) if found_limits is not None else None
    agent = ChatAgent(
        client,
        tools=tools,
        options=options_from_data(args.pop("options", None), where=where),
        history_reducer=build(reducer, ctx, where=f"{where}.history_reducer")
        if reducer is not None
        else None,
        owns_client=True,
        retry_policy=_retry_from_data(retry, where) if retry is not None else None,
        context_providers=providers,
        owns_providers=True,
        guardrails=guardrails,
        usage_limits=limits,
        **args,
    )
    if guard_data is not None:
        setattr(agent, DATA_ATTR, guard_data)
    return agent


def _build_truncating(config: Mapping[str, Any], ctx: ConfigContext) -> TruncatingReducer:
    where = "cantata.agents.TruncatingReducer"
    args = _fields(config, {"keep_last", "keep_system"}, where)
    _typed(args, {"keep_last": int, "keep_system": bool}, where)
    if "keep_last" not in args:
        raise SpecError(f"{where}: 'keep_last' (a number of messages) is needed")
    return TruncatingReducer(**args)


def _dump_summarizing(r: SummarizingReducer, ctx: ConfigContext) -> dict[str, Any]:
    return {
        "client": _dump(r.client, ctx),
        "keep_last": r.keep_last,
        "threshold": r.threshold,
        "prompt": r.prompt,
    }


def _build_summarizing(config: Mapping[str, Any], ctx: ConfigContext) -> SummarizingReducer:
    where = "cantata.agents.SummarizingReducer"
    args = _fields(config, {"client", "keep_last", "threshold", "prompt"}, where)
    _typed(args, {"keep_last": int, "threshold": int, "prompt": str}, where)
    client = build(args.pop("client", None), ctx, where=f"{where}.client")
    return SummarizingReducer(client, **args)


def _register() -> None:
    register_component(
        ComponentAdapter("cantata.tools.FunctionTool", "tool", FunctionTool, _dump_tool,
                         _build_tool)
    )  # fmt: skip
    register_component(
        ComponentAdapter("cantata.agents.ChatAgent", "agent", ChatAgent, _dump_agent,
                         _build_agent)
    )  # fmt: skip
    register_component(
        ComponentAdapter("cantata.agents.TruncatingReducer", "reducer", TruncatingReducer,
                         lambda r, c: {"keep_last": r.keep_last, "keep_system": r.keep_system},
                         _build_truncating)
    )  # fmt: skip
    register_component(
        ComponentAdapter("cantata.agents.SummarizingReducer", "reducer", SummarizingReducer,
                         _dump_summarizing, _build_summarizing)
    )  # fmt: skip


_register()
