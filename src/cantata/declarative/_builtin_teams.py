"""Adapters of termination conditions, speaker policies and teams."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..teams import (
    AndTermination,
    Concurrent,
    FunctionCall,
    GroupChat,
    HandoffTermination,
    MaxMessage,
    OrTermination,
    RoundRobin,
    Selector,
    Sequential,
    SourceMatch,
    TextMention,
    Timeout,
    TokenUsage,
)
from ._builtin_models import _fields, _typed
from .errors import SpecError
from .options import options_from_data, options_to_data
from .registry import ComponentAdapter, ConfigContext, _dump, build, register_component

__all__: list[str] = []

_T = "cantata.teams."


def _simple(
    cls: type, names: dict[str, type], required: set[str], *, public: str | None = None
) -> ComponentAdapter:
    """An adapter for a class whose config is its constructor's keyword arguments."""
    where = _T + (public or cls.__name__)

    def dump(obj: Any, ctx: ConfigContext) -> dict[str, Any]:
        out = {n: getattr(obj, n) for n in names}
        return {k: sorted(v) if isinstance(v, frozenset) else v for k, v in out.items()}

    def load(config: Mapping[str, Any], ctx: ConfigContext) -> Any:
        args = _fields(config, set(names), where)
        missing = sorted(required - set(args))
        if missing:
            raise SpecError(f"{where}: missing field(s) {missing}")
        _typed(args, names, where)
        return cls(**args)

    return ComponentAdapter(where, "termination", cls, dump, load)


def _combined(cls: type) -> ComponentAdapter:
    where = _T + cls.__name__

    def dump(obj: Any, ctx: ConfigContext) -> dict[str, Any]:
        return {"conditions": [_dump(c, ctx) for c in obj.conditions]}

    def load(config: Mapping[str, Any], ctx: ConfigContext) -> Any:
        args = _fields(config, {"conditions"}, where)
        parts = args.get("conditions")
        if not isinstance(parts, list) or len(parts) < 2:
            raise SpecError(f"{where}: 'conditions' must be a list of at least two configs")
        return cls(*(build(p, ctx, where=f"{where}[{i}]") for i, p in enumerate(parts)))

    return ComponentAdapter(where, "termination", cls, dump, load)


def _dump_selector(s: Selector, ctx: ConfigContext) -> dict[str, Any]:
    if s.selector_func is not None or callable(s.fallback) or callable(s.candidates):
        raise SpecError("a Selector with Python functions (selector_func, fallback, "
                        "candidates) cannot be written to a config")  # fmt: skip
    return {
        "client": _dump(s.client, ctx),
        "prompt": s.prompt,
        "allow_repeat": s.allow_repeat,
        "max_repeats": s.max_repeats,
        "fallback": s.fallback,
        "max_attempts": s.max_attempts,
        "max_history": s.max_history,
        "structured": s.structured,
        "options": options_to_data(s.options, where="Selector") if s.options else None,
    }


def _build_selector(config: Mapping[str, Any], ctx: ConfigContext) -> Selector:
    where = _T + "Selector"
    names = {"client", "prompt", "allow_repeat", "max_repeats", "fallback", "max_attempts",
             "max_history", "structured", "options"}  # fmt: skip
    args = _fields(config, names, where)
    _typed(args, {"prompt": str, "allow_repeat": bool, "max_repeats": int}, where)
    _typed(args, {"fallback": str, "max_attempts": int, "max_history": int}, where)
    _typed(args, {"structured": bool}, where)
    client = build(args.pop("client", None), ctx, where=f"{where}.client")
    opts = args.pop("options", None)
    options = options_from_data(opts, where=where) if opts is not None else None
    return Selector(client, options=options, **{k: v for k, v in args.items() if v is not None})


def _participants(config: Mapping[str, Any], ctx: ConfigContext, where: str) -> list[Any]:
    parts = config.get("participants")
    if not isinstance(parts, list) or not parts:
        raise SpecError(f"{where}: 'participants' must be a non-empty list of agent configs")
    return [build(p, ctx, where=f"{where}.participants[{i}]") for i, p in enumerate(parts)]


_COMPONENTS = ("speaker", "history_reducer")


def _team(cls: type, extra: dict[str, type]) -> ComponentAdapter:
    where = _T + cls.__name__
    names = {"name", "description", "participants", "termination", *extra}

    def dump(team: Any, ctx: ConfigContext) -> dict[str, Any]:
        if getattr(team, "aggregator", None) is not None:
            raise SpecError(
                f"team {team.name!r}: an aggregator (a Python function) cannot be written "
                "to a config; leave it out, or rebuild the team in code after loading"
            )
        out: dict[str, Any] = {
            "name": team.name,
            "description": team.description,
            "participants": [_dump(a, ctx) for a in team.participants],
            "termination": _dump(team.termination, ctx) if team.termination else None,
        }
        for n in extra:
            value = getattr(team, n)
            out[n] = _dump(value, ctx) if n in _COMPONENTS and value is not None else value
        return out

    def load(config: Mapping[str, Any], ctx: ConfigContext) -> Any:
        args = _fields(config, names, where)
        _typed(args, {"name": str, "description": str}, where)
        _typed(args, {k: v for k, v in extra.items() if v is not object}, where)
        args["participants"] = _participants(args, ctx, where)
        for key in ("termination", *_COMPONENTS):
            if args.get(key) is not None:
                args[key] = build(args[key], ctx, where=f"{where}.{key}")
        kept = {k: v for k, v in args.items() if v is not None}
        return cls(kept.pop("participants"), **kept)

    return ComponentAdapter(where, "team", cls, dump, load)


def _register() -> None:
    adapters: list[ComponentAdapter] = [
        _simple(MaxMessage, {"max_messages": int}, {"max_messages"}),
        _simple(TextMention, {"text": str, "sources": list}, {"text"}),
        _simple(SourceMatch, {"sources": list}, {"sources"}),
        _simple(HandoffTermination, {"target": str}, {"target"}, public="HandoffTermination"),
        _simple(FunctionCall, {"function_name": str}, {"function_name"}),
        _simple(Timeout, {"seconds": float}, {"seconds"}),
        _simple(
            TokenUsage,
            {"max_total_tokens": int, "max_input_tokens": int, "max_output_tokens": int},
            set(),
        ),
        _combined(OrTermination),
        _combined(AndTermination),
        ComponentAdapter(_T + "RoundRobin", "speaker_policy", RoundRobin,
                         lambda o, c: {}, _round_robin),
        ComponentAdapter(_T + "Selector", "speaker_policy", Selector, _dump_selector,
                         _build_selector),
        _team(GroupChat, {"speaker": object, "max_turns": int, "history_reducer": object}),
        _team(Sequential, {"chain_only_agent_responses": bool}),
        _team(Concurrent, {}),
    ]  # fmt: skip
    for a in adapters:
        register_component(a)


def _round_robin(config: Mapping[str, Any], ctx: ConfigContext) -> RoundRobin:
    _fields(config, set(), _T + "RoundRobin")
    return RoundRobin()


_register()
