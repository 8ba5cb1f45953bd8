"""Adapters of the handoff (swarm) and magentic teams."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..teams import Handoff, Magentic
from ._builtin_models import _fields, _typed
from ._builtin_teams import _participants
from .errors import SpecError
from .options import options_from_data, options_to_data
from .registry import ComponentAdapter, ConfigContext, _dump, build, register_component

__all__: list[str] = []

_H = "cantata.teams.Handoff"
_M = "cantata.teams.Magentic"
_LIMITS = ("max_rounds", "max_stalls", "max_resets", "max_plan_reviews", "ledger_retries")


def _common(team: Any, ctx: ConfigContext) -> dict[str, Any]:
    return {
        "name": team.name,
        "description": team.description,
        "participants": [_dump(a, ctx) for a in team.participants],
        "termination": _dump(team.termination, ctx) if team.termination else None,
    }


def _load_common(args: dict[str, Any], ctx: ConfigContext, where: str) -> dict[str, Any]:
    _typed(args, {"name": str, "description": str}, where)
    args["participants"] = _participants(args, ctx, where)
    if args.get("termination") is not None:
        args["termination"] = build(args["termination"], ctx, where=f"{where}.termination")
    return {k: v for k, v in args.items() if v is not None}


def _dump_handoff(team: Handoff, ctx: ConfigContext) -> dict[str, Any]:
    return {
        **_common(team, ctx),
        "start": team.start,
        "handoffs": {k: list(v) for k, v in team.targets.items()},
        "autonomous": team.autonomous,
        "return_to_previous": team.return_to_previous,
        "max_turns": team.max_turns,
    }


def _build_handoff(config: Mapping[str, Any], ctx: ConfigContext) -> Handoff:
    names = {"name", "description", "participants", "termination", "start", "handoffs",
             "autonomous", "return_to_previous", "max_turns"}  # fmt: skip
    args = _fields(config, names, _H, required={"participants"})
    _typed(args, {"start": str, "handoffs": dict, "autonomous": bool}, _H)
    _typed(args, {"return_to_previous": bool, "max_turns": int}, _H)
    for source, targets in (args.get("handoffs") or {}).items():
        if not isinstance(targets, list) or not all(isinstance(t, str) for t in targets):
            raise SpecError(f"{_H}: handoffs of {source!r:.60} must be a list of agent names")
    kept = _load_common(args, ctx, _H)
    return Handoff(kept.pop("participants"), **kept)


def _dump_magentic(team: Magentic, ctx: ConfigContext) -> dict[str, Any]:
    return {
        **_common(team, ctx),
        "manager": _dump(team.client, ctx),
        **{k: getattr(team.limits, k) for k in _LIMITS},
        "plan_review": team.plan_review,
        "require_plan_done": team.require_plan_done,
        "max_repeats": team.max_repeats,
        "compact_ledgers": team.compact_ledgers,
        "manager_options": options_to_data(team.manager_options, where=_M),
        "manager_name": team.manager_name,
    }


def _build_magentic(config: Mapping[str, Any], ctx: ConfigContext) -> Magentic:
    names = {"name", "description", "participants", "termination", "manager", *_LIMITS,
             "plan_review", "require_plan_done", "max_repeats", "compact_ledgers",
             "manager_options", "manager_name"}  # fmt: skip
    args = _fields(config, names, _M, required={"participants", "manager"})
    _typed(args, dict.fromkeys((*_LIMITS, "max_repeats"), int), _M)
    _typed(args, dict.fromkeys(("plan_review", "require_plan_done", "compact_ledgers"), bool), _M)
    _typed(args, {"manager_name": str}, _M)
    manager = build(args.pop("manager"), ctx, where=f"{_M}.manager")
    opts = args.pop("manager_options", None)
    kept = _load_common(args, ctx, _M)
    return Magentic(
        manager,
        kept.pop("participants"),
        manager_options=options_from_data(opts, where=_M),
        **kept,
    )


register_component(ComponentAdapter(_H, "team", Handoff, _dump_handoff, _build_handoff))
register_component(ComponentAdapter(_M, "team", Magentic, _dump_magentic, _build_magentic))
