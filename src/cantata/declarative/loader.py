"""`load`: a spec (a file, YAML text or a dict) into an agent, a team or a workflow.

The text is parsed once (YAML ``safe_load``: no tags that build objects) to read its
``version`` and ``type``; the type's spec class then resolves the placeholders and the
result is parsed again, checked against the spec model, turned into component configs and
built. Tools and referenced agents come only from what the caller passes.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from ..core import SchemaVersionError
from .errors import SpecError
from .placeholders import MAX_DEPTH, resolve_placeholders
from .registry import ComponentAdapter, ConfigContext, build, make_context, register_component
from .spec_configs import agent_config, remote_agent_config, team_config, workflow_config
from .spec_models import SPEC_VERSION, AgentSpec, RemoteAgentSpec, TeamSpec, WorkflowSpec

__all__ = [
    "MAX_SPEC_BYTES",
    "SPEC_SUFFIXES",
    "AgentRef",
    "SpecType",
    "load",
    "parse_spec",
    "register_spec_type",
    "spec_types",
]

MAX_SPEC_BYTES = 1_000_000
"""Largest spec text read (a spec is a page, not a data set)."""

SPEC_SUFFIXES = (".yaml", ".yml", ".json")
"""The endings that make a string given to `load` (or `cantata serve`) a spec file's path."""


@dataclass(frozen=True)
class SpecType:
    """A spec `type`: its pydantic model and how a checked spec becomes a config."""

    name: str
    model: type[BaseModel]
    to_config: Callable[[Any], dict[str, Any]]


_TYPES: dict[str, SpecType] = {}


def register_spec_type(spec_type: SpecType) -> None:
    """Register (or replace) a spec type."""
    _TYPES[spec_type.name] = spec_type


def spec_types() -> list[str]:
    """The known spec types."""
    return sorted(_TYPES)


class AgentRef:
    """A participant named in a spec and passed by the caller in ``agents=``."""


def _build_ref(config: Mapping[str, Any], ctx: ConfigContext) -> Any:
    name = config.get("name")
    if not isinstance(name, str) or name not in ctx.agents:
        raise SpecError(
            f"agent {str(name)[:100]!r} is referenced but not given; pass it in agents=[...] "
            f"(given: {sorted(ctx.agents) or 'none'})",
            agent_name=str(name)[:100],
        )
    return ctx.agents[name]


def _refuse_dump(obj: Any, ctx: ConfigContext) -> dict[str, Any]:
    raise SpecError("an agent reference has no config of its own")


register_component(
    ComponentAdapter("cantata.declarative.AgentRef", "agent", AgentRef, _refuse_dump, _build_ref)
)


def _read(source: str | os.PathLike[str] | Mapping[str, Any]) -> Any:
    if isinstance(source, Mapping):
        return dict(source)
    if isinstance(source, os.PathLike) or (
        isinstance(source, str) and "\n" not in source and source.endswith(SPEC_SUFFIXES)
    ):
        path = Path(source)
        try:
            with path.open("rb") as f:
                raw = f.read(MAX_SPEC_BYTES + 1)
        except OSError as exc:
            raise SpecError(f"spec file {str(path)!r} cannot be read: {exc}") from exc
        text = raw.decode("utf-8", errors="replace")
    elif isinstance(source, str):
        text = source
    else:
        raise SpecError(f"load() takes a path, YAML text or a dict, got {type(source).__name__}")
    if len(text) > MAX_SPEC_BYTES:
        raise SpecError(f"the spec is larger than {MAX_SPEC_BYTES} bytes")
    _check_flow_depth(text)
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise SpecError(f"the spec is not valid YAML: {str(exc)[:500]}") from exc
    except RecursionError as exc:
        raise SpecError("the spec is nested too deeply to read") from exc


def _check_flow_depth(text: str) -> None:
    """Refuse deeply nested ``[`` / ``{`` before parsing: PyYAML parses nesting by
    recursion, which takes a second or more on a few thousand levels before failing."""
    depth = deepest = 0
    quote = ""
    for ch in text:
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "\"'":
            quote = ch
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth = max(0, depth - 1)
    if deepest > MAX_DEPTH:
        raise SpecError(f"the spec is nested more than {MAX_DEPTH} levels deep; flatten it")


def parse_spec(
    source: str | os.PathLike[str] | Mapping[str, Any],
    *,
    settings: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
) -> BaseModel:
    """The checked spec model of `source`, placeholders resolved (nothing built)."""
    data = _read(source)
    if not isinstance(data, Mapping):
        raise SpecError(
            f"a spec must be a mapping with version and type, got {type(data).__name__}"
        )
    version = data.get("version")
    if version is None:
        raise SpecError(f"the spec has no 'version'; write version: {SPEC_VERSION}")
    if version != SPEC_VERSION or isinstance(version, bool):
        raise SchemaVersionError(
            f"spec version {str(version)[:40]!r} is not known; this cantata reads version "
            f"{SPEC_VERSION}",
            version=str(version)[:40],
        )
    kind = data.get("type")
    spec_type = _TYPES.get(kind) if isinstance(kind, str) else None
    if spec_type is None:
        raise SpecError(
            f"unknown spec type {str(kind)[:80]!r}; known types: {spec_types()}",
            spec_type=str(kind)[:80],
        )
    resolved = resolve_placeholders(
        data, env=os.environ if env is None else env, settings=dict(settings or {})
    )
    try:
        return spec_type.model.model_validate(resolved)
    except ValidationError as exc:
        raise SpecError(_describe(exc, kind, resolved.get("name"))) from None
    except RecursionError as exc:
        raise SpecError("the spec is nested too deeply to check") from exc


def _describe(exc: ValidationError, kind: Any, name: Any) -> str:
    lines = []
    for err in exc.errors()[:10]:
        where = ".".join(str(p) for p in err["loc"]) or "top"
        lines.append(f"{where}: {err['msg']}")
    more = f" (and {exc.error_count() - 10} more)" if exc.error_count() > 10 else ""
    return f"{kind} spec {str(name)[:80]!r} is invalid: " + "; ".join(lines) + more


def load(
    source: str | os.PathLike[str] | Mapping[str, Any],
    *,
    tools: Iterable[Any] | Mapping[str, Any] = (),
    agents: Iterable[Any] | Mapping[str, Any] = (),
    settings: Mapping[str, Any] | None = None,
    allow: Iterable[str] = (),
    env: Mapping[str, str] | None = None,
) -> Any:
    """The agent, team or workflow a spec describes (a path, YAML text, or a parsed dict).

    In an agent spec, ``model.options`` become the agent's chat options, ``inputs``
    defaults its template arguments, and when both ``instructions`` and ``template`` are
    given, ``instructions`` wins.

    Placeholders ``${Env:NAME}`` (from `env`, default the process environment) and
    ``${Settings:key}`` (from `settings`) are resolved; an unresolved one is an error
    naming it. Tools resolve against `tools` (by name or import path) or import paths
    in `allow`; agents named as participants against `agents`. The agent owns its model
    client (``async with agent:`` closes it).
    """
    spec = parse_spec(source, settings=settings, env=env)
    ctx = make_context(tools=tools, agents=agents, allow=allow, settings=settings)
    spec_type = _TYPES[spec.type]  # type: ignore[attr-defined]
    config = spec_type.to_config(spec)
    return build(config, ctx, where=f"{spec_type.name} spec")


def _register_builtin_specs() -> None:
    register_spec_type(SpecType("chat_agent", AgentSpec, agent_config))
    register_spec_type(SpecType("remote_agent", RemoteAgentSpec, remote_agent_config))
    for kind in ("group_chat", "sequential", "concurrent", "handoff", "magentic"):
        register_spec_type(SpecType(kind, TeamSpec, team_config))
    register_spec_type(SpecType("workflow", WorkflowSpec, workflow_config))


_register_builtin_specs()
