"""Adapters of the components that hold a Python function: `Functional` termination,
`FunctionPolicy` speaker policy; and of `External` termination, which holds nothing.

A function is written by its import path (``module.qualname``), like a tool, and loaded
back only from an import path the caller allows (``allow=['myapp.policies']``): nothing in
a config is imported otherwise. A lambda or a nested function has no import path and is
refused when written.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Mapping
from typing import Any

from ..teams import External, Functional, FunctionPolicy
from ._builtin_models import _fields, _typed
from .errors import SpecError, UntrustedProviderError
from .registry import ComponentAdapter, ConfigContext, register_component

__all__: list[str] = []

_T = "cantata.teams."
_DOTTED = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+")


def _function_path(fn: Any, where: str) -> str:
    module = getattr(fn, "__module__", None)
    qual = getattr(fn, "__qualname__", None)
    if not module or not qual or "<" in qual or "." in qual:
        raise SpecError(
            f"{where}: function {getattr(fn, '__name__', fn)!r} has no import path (a lambda, "
            "a method or a nested function); define it at module level to write it in a config"
        )
    return f"{module}.{qual}"


def _function(path: Any, ctx: ConfigContext, where: str) -> Callable[..., Any]:
    """The function at `path`, imported only when the caller allows it."""
    if not isinstance(path, str) or not _DOTTED.fullmatch(path):
        raise SpecError(f"{where}: 'function' must be an import path like 'module.function'")
    if not ctx.allows(path):
        raise UntrustedProviderError(
            f"{where}: function {path[:200]!r} is not in the allow list {list(ctx.allow)}; "
            "pass allow=['its.module'] to trust it",
            provider=path[:200],
        )
    module, _, name = path.rpartition(".")
    try:
        fn = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise SpecError(f"{where}: function {path!r} cannot be imported: {exc}") from exc
    if not callable(fn) or isinstance(fn, type):
        raise SpecError(f"{where}: {path!r} is not a function")
    found: Callable[..., Any] = fn
    return found


def _dump_functional(cond: Functional, ctx: ConfigContext) -> dict[str, Any]:
    return {"function": _function_path(cond.fn, _T + "Functional"), "name": cond.name}


def _build_functional(config: Mapping[str, Any], ctx: ConfigContext) -> Functional:
    where = _T + "Functional"
    args = _fields(config, {"function", "name"}, where, required={"function"})
    _typed(args, {"name": str}, where)
    return Functional(_function(args["function"], ctx, where), name=args.get("name"))


def _dump_policy(policy: FunctionPolicy, ctx: ConfigContext) -> dict[str, Any]:
    return {"function": _function_path(policy.fn, _T + "FunctionPolicy")}


def _build_policy(config: Mapping[str, Any], ctx: ConfigContext) -> FunctionPolicy:
    where = _T + "FunctionPolicy"
    args = _fields(config, {"function"}, where, required={"function"})
    return FunctionPolicy(_function(args["function"], ctx, where))


def _build_external(config: Mapping[str, Any], ctx: ConfigContext) -> External:
    _fields(config, set(), _T + "External")
    return External()


register_component(
    ComponentAdapter(_T + "Functional", "termination", Functional, _dump_functional,
                     _build_functional)
)  # fmt: skip
register_component(
    ComponentAdapter(_T + "FunctionPolicy", "speaker_policy", FunctionPolicy, _dump_policy,
                     _build_policy)
)  # fmt: skip
register_component(
    ComponentAdapter(_T + "External", "termination", External, lambda o, c: {}, _build_external)
)
