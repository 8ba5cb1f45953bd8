"""Component configs: ``{provider, component_type, version, config}`` as JSON.

Each component class has an adapter (a pair of functions) registered here under its
provider name, the class's import path (``cantata.models.OpenAIChatClient``). Loading never
runs code from the text: a provider in ``cantata.*`` must be registered, and any other one
must start with a namespace the caller allows, whose module is then imported and whose
class must have a ``from_config`` classmethod (or register an adapter on import).
"""

from __future__ import annotations

import importlib
import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..core import CantataError, SchemaVersionError
from .context import ConfigContext
from .errors import SpecError, UntrustedProviderError
from .placeholders import resolve_placeholders
from .tool_refs import index_tools

__all__ = [
    "ComponentAdapter",
    "ConfigContext",
    "from_config",
    "provider_of",
    "register_component",
    "registered_providers",
    "to_config",
]

_DOTTED = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+")


@dataclass(frozen=True)
class ComponentAdapter:
    """How one class becomes a config and back."""

    provider: str
    component_type: str
    cls: type
    dump: Callable[[Any, ConfigContext], dict[str, Any]]
    build: Callable[[Mapping[str, Any], ConfigContext], Any]
    version: int = 1


_BY_PROVIDER: dict[str, ComponentAdapter] = {}
_BY_CLASS: dict[type, ComponentAdapter] = {}


def register_component(adapter: ComponentAdapter) -> None:
    """Register (or replace) the adapter of a component class."""
    _BY_PROVIDER[adapter.provider] = adapter
    _BY_CLASS[adapter.cls] = adapter


def registered_providers() -> list[str]:
    """The provider names that load without an allow list."""
    return sorted(_BY_PROVIDER)


def provider_of(obj: Any) -> ComponentAdapter:
    """The adapter registered for `obj`'s class (its nearest registered base)."""
    for cls in type(obj).__mro__:
        if cls in _BY_CLASS:
            return _BY_CLASS[cls]
    raise SpecError(
        f"{type(obj).__name__} has no component config: register a ComponentAdapter for it "
        f"with cantata.declarative.register_component (registered: "
        f"{', '.join(registered_providers())})",
        component=type(obj).__name__,
    )


def to_config(obj: Any, *, include_secrets: bool = False) -> dict[str, Any]:
    """`obj` as a component config (JSON). Secrets (API keys, tokens, passwords, MCP
    headers and server environments) are left out; with ``include_secrets=True`` they are
    written as ``${Env:...}`` placeholders, never as their values."""
    return _dump(obj, ConfigContext(include_secrets=include_secrets))


def _dump(obj: Any, ctx: ConfigContext) -> dict[str, Any]:
    # A registered adapter (of the class or a base) wins, so a `to_config` method that
    # delegates here cannot recurse; a class of the caller's own may write its config.
    registered = any(cls in _BY_CLASS for cls in type(obj).__mro__)
    own = getattr(type(obj), "to_config", None)
    if own is not None and not registered:
        data = own(obj)
        if not isinstance(data, dict):
            raise SpecError(f"{type(obj).__name__}.to_config() must return a dict")
        return data
    adapter = provider_of(obj)
    return {
        "provider": adapter.provider,
        "component_type": adapter.component_type,
        "version": adapter.version,
        "config": adapter.dump(obj, ctx),
    }


def from_config(
    data: Mapping[str, Any],
    *,
    tools: Iterable[Any] | Mapping[str, Any] = (),
    agents: Iterable[Any] | Mapping[str, Any] = (),
    allow: Iterable[str] = (),
    settings: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
) -> Any:
    """The component a config describes. Placeholders are resolved first (`env` defaults
    to the process environment); tools and functions resolve only against `tools` or the
    import paths in `allow`, which also lets providers outside ``cantata.*`` load, and
    lets the built-in providers that start programs load (``cantata.tools.MCPTools`` for a
    stdio server, ``cantata.teams.CodeRunnerAgent``)."""
    ctx = make_context(tools=tools, agents=agents, allow=allow, settings=settings)
    resolved = resolve_placeholders(
        data, env=os.environ if env is None else env, settings=ctx.settings
    )
    return build(resolved, ctx, where="config")


def make_context(
    *,
    tools: Iterable[Any] | Mapping[str, Any] = (),
    agents: Iterable[Any] | Mapping[str, Any] = (),
    allow: Iterable[str] = (),
    settings: Mapping[str, Any] | None = None,
) -> ConfigContext:
    """A `ConfigContext` from the caller's arguments, checked."""
    allowed = tuple(allow) if not isinstance(allow, str) else (allow,)
    for p in allowed:
        if not isinstance(p, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.]*", p):
            raise SpecError(f"allow= entries must be import paths like 'myapp.tools', got {p!r}")
    agent_map = _agent_map(agents)
    if settings is not None and not isinstance(settings, Mapping):
        raise SpecError(f"settings= must be a mapping, got {type(settings).__name__}")
    return ConfigContext(
        tools=index_tools(tools), agents=agent_map, allow=allowed, settings=dict(settings or {})
    )


def _agent_map(agents: Iterable[Any] | Mapping[str, Any]) -> dict[str, Any]:
    from ..agents import Agent

    pairs = list(agents.items()) if isinstance(agents, Mapping) else [(None, a) for a in agents]
    out: dict[str, Any] = {}
    for key, agent in pairs:
        if not isinstance(agent, Agent):
            raise SpecError(f"agents= must hold agents, got {agent!r:.100}")
        out[str(key) if key is not None else agent.name] = agent
    return out


def build(data: Any, ctx: ConfigContext, *, where: str) -> Any:
    """The component of an already resolved config."""
    if not isinstance(data, Mapping):
        raise SpecError(f"{where}: a component config must be a mapping, got {_kind(data)}")
    unknown = sorted(set(map(str, data)) - {"provider", "component_type", "version", "config"})
    if unknown:
        raise SpecError(f"{where}: unknown field(s) {unknown} in a component config")
    provider = data.get("provider")
    if not isinstance(provider, str):
        raise SpecError(f"{where}: 'provider' must be a string, got {_kind(provider)}")
    config = data.get("config", {})
    if not isinstance(config, Mapping):
        raise SpecError(f"{where}: 'config' of {provider} must be a mapping, got {_kind(config)}")
    adapter = _BY_PROVIDER.get(provider)
    if adapter is None:
        return _build_allowed(provider, data, ctx, where)
    version = data.get("version", adapter.version)
    if version != adapter.version or isinstance(version, bool):
        raise SchemaVersionError(
            f"{where}: {provider} config version {version!r} is not known; this cantata "
            f"reads version {adapter.version}",
            provider=provider,
        )
    try:
        return adapter.build(config, ctx)
    except TypeError as exc:  # a constructor refusing a value of the wrong kind
        if isinstance(exc, CantataError):
            raise
        raise SpecError(f"{where}: {provider} cannot be built from this config: {exc}") from exc


def _build_allowed(provider: str, data: Mapping[str, Any], ctx: ConfigContext, where: str) -> Any:
    if provider.startswith("cantata.") or not ctx.allows(provider):
        raise UntrustedProviderError(
            f"{where}: provider {provider[:200]!r} is not registered and not in the allow "
            f"list {list(ctx.allow)}; pass allow=['your.package'] to trust it (cantata's own "
            f"are: {', '.join(registered_providers())})",
            provider=provider[:200],
        )
    if not _DOTTED.fullmatch(provider):
        raise UntrustedProviderError(f"{where}: provider {provider!r} is not an import path")
    module, _, name = provider.rpartition(".")
    try:
        cls = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise SpecError(f"{where}: provider {provider!r} cannot be imported: {exc}") from exc
    if provider in _BY_PROVIDER:  # the module registered an adapter when imported
        return build(data, ctx, where=where)
    load = getattr(cls, "from_config", None)
    if not isinstance(cls, type) or load is None:
        raise UntrustedProviderError(
            f"{where}: provider {provider!r} is not a class with a from_config classmethod"
        )
    return load(dict(data.get("config", {})))


def _kind(value: Any) -> str:
    return type(value).__name__
