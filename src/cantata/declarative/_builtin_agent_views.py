"""Adapters of the agents that wrap something else: a team or a workflow used as an agent
(`TeamAgent`, `WorkflowAgent`), and `CodeRunnerAgent`, which runs the Python code it finds
in the conversation.

A code runner executes what models write, so a config of one loads only when the caller
allows it by its provider name (``allow=['cantata.teams.CodeRunnerAgent']``), and its
interpreter is always the running one: a config never names a program to start.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

from ..core import CantataError
from ..teams import CodeRunnerAgent, Team, TeamAgent
from ..tools import LocalCodeExecutor
from ..workflows import Workflow, WorkflowAgent
from ._builtin_models import _fields, _typed
from .errors import SpecError, UntrustedProviderError
from .registry import ComponentAdapter, ConfigContext, _dump, build, register_component

__all__: list[str] = []

_TEAM_AGENT = "cantata.teams.TeamAgent"
_WORKFLOW_AGENT = "cantata.workflows.WorkflowAgent"
_CODE_RUNNER = "cantata.teams.CodeRunnerAgent"


def _view(provider: str, attr: str, kind: type[Any], cls: type[Any]) -> ComponentAdapter:
    """The adapter of an agent view `cls` of a team or a workflow (`attr` holds it)."""

    def dump(agent: Any, ctx: ConfigContext) -> dict[str, Any]:
        return {
            attr: _dump(getattr(agent, attr), ctx),
            "name": agent.name,
            "description": agent.description,
        }

    def load(config: Mapping[str, Any], ctx: ConfigContext) -> Any:
        args = _fields(config, {attr, "name", "description"}, provider, required={attr})
        _typed(args, {"name": str, "description": str}, provider)
        inner = build(args[attr], ctx, where=f"{provider}.{attr}")
        if not isinstance(inner, kind):
            raise SpecError(f"{provider}: {attr!r} must be a {attr} config, got {inner!r:.80}")
        return cls(inner, name=args.get("name"), description=args.get("description"))

    return ComponentAdapter(provider, "agent", cls, dump, load)


def _dump_code_runner(agent: CodeRunnerAgent, ctx: ConfigContext) -> dict[str, Any]:
    executor = agent.executor
    if executor.python != sys.executable:
        raise SpecError(
            f"code runner {agent.name!r}: its interpreter {executor.python!r} is not written "
            "to configs (a config never names a program to start); the loaded one uses the "
            "running Python"
        )
    owned = executor._owned is not None  # a private scratch directory is made afresh
    return {
        "name": agent.name,
        "description": agent.description,
        "run_bare_text": agent.run_bare_text,
        "timeout": executor.timeout,
        "max_output": executor.max_output,
        "work_dir": None if owned else str(executor.work_dir),
    }


def _build_code_runner(config: Mapping[str, Any], ctx: ConfigContext) -> CodeRunnerAgent:
    where = _CODE_RUNNER
    if not ctx.allows(where):
        raise UntrustedProviderError(
            f"{where}: a code runner executes the code models write; it loads only when the "
            f"caller allows it: allow=[{where!r}]",
            provider=where,
        )
    names = {"name", "description", "run_bare_text", "timeout", "max_output", "work_dir"}
    args = _fields(config, names, where)
    _typed(args, {"name": str, "description": str, "run_bare_text": bool}, where)
    _typed(args, {"timeout": float, "max_output": int, "work_dir": str}, where)
    settings = {k: args.pop(k) for k in ("timeout", "max_output", "work_dir") if k in args}
    try:
        executor = LocalCodeExecutor(**settings)
    except CantataError:
        raise
    except (ValueError, OSError) as exc:  # a work_dir the system cannot even look up
        raise SpecError(f"{where}: work_dir {settings.get('work_dir')!r:.120}: {exc}") from exc
    return CodeRunnerAgent(executor, **{k: v for k, v in args.items() if v is not None})


register_component(_view(_TEAM_AGENT, "team", Team, TeamAgent))
register_component(_view(_WORKFLOW_AGENT, "workflow", Workflow, WorkflowAgent))
register_component(
    ComponentAdapter(_CODE_RUNNER, "agent", CodeRunnerAgent, _dump_code_runner,
                     _build_code_runner)
)  # fmt: skip
