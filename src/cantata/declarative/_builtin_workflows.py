"""The workflow provider: a graph of agent steps with declarative edge conditions.

A workflow built in code holds Python conditions, which no config can carry; this
provider builds workflows from data only (``when: {contains: ...}``), so it loads but does
not dump (`to_config` of a workflow is refused with that reason).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Mapping
from typing import Any

from ..workflows import AgentExecutor, Case, Default, Workflow, WorkflowBuilder
from ._builtin_models import _fields, _typed
from .errors import SpecError
from .registry import ComponentAdapter, ConfigContext, build, register_component

__all__ = ["workflow_agents"]

_AGENTS: weakref.WeakKeyDictionary[Workflow, list[Any]] = weakref.WeakKeyDictionary()


def workflow_agents(workflow: Workflow) -> list[Any]:
    """The agents a loaded workflow's steps run (to close them: they own their clients)."""
    return list(_AGENTS.get(workflow, []))


_WHERE = "cantata.workflows.Workflow"


def _text_of(message: Any) -> str:
    text = getattr(message, "text", None)
    if isinstance(text, str):
        return text
    if isinstance(message, list):
        return "\n".join(_text_of(m) for m in message)
    return str(message)


def _condition(when: Any, where: str) -> Callable[[Any], bool]:
    if not isinstance(when, Mapping) or not when:
        raise SpecError(f"{where}: 'when' must be a mapping with contains or not_contains")
    args = _fields(when, {"contains", "not_contains"}, where)
    _typed(args, {"contains": str, "not_contains": str}, where)
    yes, no = args.get("contains"), args.get("not_contains")

    def holds(message: Any) -> bool:
        text = _text_of(message)
        return (yes is None or yes in text) and (no is None or no not in text)

    return holds


def _step(config: Mapping[str, Any], ctx: ConfigContext, i: int) -> AgentExecutor:
    where = f"{_WHERE}.executors[{i}]"
    args = _fields(config, {"agent", "context_mode"}, where, required={"agent"})
    mode = args.get("context_mode", "full")
    if mode not in ("full", "last_agent"):
        raise SpecError(f"{where}: context_mode must be 'full' or 'last_agent', got {mode!r:.40}")
    agent = build(args["agent"], ctx, where=where)
    return AgentExecutor(agent, context_mode=mode)


def _edge(b: WorkflowBuilder, edge: Any, steps: Mapping[str, Any], where: str) -> None:
    if not isinstance(edge, Mapping):
        raise SpecError(f"{where}: an edge must be a mapping")
    args = _fields(edge, {"from", "to", "when", "fan_out", "fan_in", "switch"}, where)

    def step(name: Any) -> Any:
        if not isinstance(name, str) or name not in steps:
            raise SpecError(f"{where}: {str(name)[:80]!r} is not a step; steps: {sorted(steps)}")
        return steps[name]

    def names(key: str) -> list[Any]:
        value = args.get(key)
        if not isinstance(value, list) or not value:
            raise SpecError(f"{where}: {key!r} must be a non-empty list of step names")
        return [step(n) for n in value]

    if "fan_out" in args:
        b.add_fan_out_edges(step(args.get("from")), names("fan_out"))
    elif "fan_in" in args:
        b.add_fan_in_edges(names("fan_in"), step(args.get("to")))
    elif "switch" in args:
        b.add_switch_case_edges(step(args.get("from")), _cases(args["switch"], step, where))
    else:
        when = args.get("when")
        cond = _condition(when, where) if when is not None else None
        b.add_edge(step(args.get("from")), step(args.get("to")), condition=cond)


def _cases(raw: Any, step: Callable[[Any], Any], where: str) -> list[Case | Default]:
    if not isinstance(raw, list) or not raw:
        raise SpecError(f"{where}: 'switch' must be a list of branches ending in a default")
    out: list[Case | Default] = []
    for j, branch in enumerate(raw):
        here = f"{where}.switch[{j}]"
        if not isinstance(branch, Mapping):
            raise SpecError(f"{here}: a branch must be a mapping")
        args = _fields(branch, {"when", "to", "default"}, here)
        if "default" in args:
            out.append(Default(step(args["default"])))
        else:
            out.append(Case(_condition(args.get("when"), here), step(args.get("to"))))
    return out


def _build_workflow(config: Mapping[str, Any], ctx: ConfigContext) -> Workflow:
    names = {"name", "description", "start", "executors", "edges", "max_supersteps"}
    args = _fields(config, names, _WHERE, required={"start", "executors"})
    _typed(args, {"name": str, "description": str, "start": str, "max_supersteps": int}, _WHERE)
    raw = args["executors"]
    if not isinstance(raw, list) or not raw:
        raise SpecError(f"{_WHERE}: 'executors' must be a non-empty list")
    built = [_step(c, ctx, i) if isinstance(c, Mapping) else None for i, c in enumerate(raw)]
    steps = {e.id: e for e in built if e is not None}
    if None in built or len(steps) != len(built):
        raise SpecError(f"{_WHERE}: each executor must be a mapping with a unique agent name")
    if args["start"] not in steps:
        raise SpecError(f"{_WHERE}: start {args['start']!r:.80} is not a step: {sorted(steps)}")
    b = WorkflowBuilder(
        steps[args["start"]],
        name=args.get("name"),
        description=args.get("description", ""),
        max_supersteps=args.get("max_supersteps", 100),
    )
    for i, e in enumerate(args.get("edges") or []):
        _edge(b, e, steps, f"{_WHERE}.edges[{i}]")
    workflow = b.build()
    _AGENTS[workflow] = [e.agent for e in steps.values()]
    return workflow


def _refuse(obj: Any, ctx: ConfigContext) -> dict[str, Any]:
    raise SpecError(
        "a workflow built in code holds Python conditions and executors that a config cannot "
        "carry; write a workflow spec (type: workflow) instead"
    )


register_component(ComponentAdapter(_WHERE, "workflow", Workflow, _refuse, _build_workflow))
