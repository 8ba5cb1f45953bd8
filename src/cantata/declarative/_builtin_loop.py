"""The adapter of `FunctionInvokingChatClient`, the tool loop around a model client: its
client, its tools (by reference), its limits and its retry policy. Middleware is Python
code, so a loop with middleware is refused when written (give the agent its middleware in
code after loading)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..tools import FunctionInvokingChatClient, FunctionTool
from ._builtin_agents import _retry_from_data, _retry_to_data
from ._builtin_models import _fields, _typed
from .errors import SpecError
from .registry import ComponentAdapter, ConfigContext, _dump, build, register_component

__all__: list[str] = []

_LOOP = "cantata.tools.FunctionInvokingChatClient"
_LIMITS = {"max_iterations": int, "max_function_calls": int, "max_consecutive_errors": int,
           "concurrent_calls": bool}  # fmt: skip


def _dump_loop(loop: FunctionInvokingChatClient, ctx: ConfigContext) -> dict[str, Any]:
    if loop.middleware:
        raise SpecError(
            f"{_LOOP}: its middleware is Python code, which no config carries; leave it out "
            "and add it in code after loading"
        )
    out: dict[str, Any] = {
        "client": _dump(loop.client, ctx),
        "tools": [_dump(t, ctx) for t in loop.tools],
        **{k: getattr(loop, k) for k in _LIMITS},
    }
    if loop.retry_policy is not None:
        out["retry_policy"] = _retry_to_data(loop.retry_policy)
    return out


def _build_loop(config: Mapping[str, Any], ctx: ConfigContext) -> FunctionInvokingChatClient:
    args = _fields(config, {"client", "tools", "retry_policy", *_LIMITS}, _LOOP,
                   required={"client"})  # fmt: skip
    _typed(args, {"tools": list, **_LIMITS}, _LOOP)
    client = build(args.pop("client"), ctx, where=f"{_LOOP}.client")
    tools = [
        build(t, ctx, where=f"{_LOOP}.tools[{i}]") for i, t in enumerate(args.pop("tools", []))
    ]
    if not all(isinstance(t, FunctionTool) for t in tools):
        raise SpecError(f"{_LOOP}: 'tools' must be tool configs (cantata.tools.FunctionTool)")
    retry = args.pop("retry_policy", None)
    policy = _retry_from_data(retry, _LOOP) if retry is not None else None
    return FunctionInvokingChatClient(client, tools=tools, retry_policy=policy, **args)


register_component(ComponentAdapter(_LOOP, "model", FunctionInvokingChatClient, _dump_loop,
                                    _build_loop))  # fmt: skip
