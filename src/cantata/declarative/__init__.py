"""cantata.declarative: agents and teams from YAML specs, and component configs.

Two views of one model of components: `to_config(obj)` / `from_config(data)` write and
read ``{provider, component_type, version, config}`` JSON for the built-in components
(model clients, tools and MCP servers, agents local and remote, reducers, termination
conditions, speaker policies, teams, workflows, stores, checkpoint stores; see
`registered_providers()`); `load(spec)` reads a spec, configs written for people with
placeholders. Nothing in a text runs code: providers load from ``cantata.*`` and the
caller's allow list only, tools and functions from ``tools=`` or allowed import paths, and
what starts a program (a stdio MCP server, a code runner) only when its provider is
allowed. Secrets (API keys, tokens, passwords) are left out, or written as ``${Env:...}``
placeholders with ``include_secrets=True``.
"""

from __future__ import annotations

import importlib

from ..core import ConfigurationError

_BUILTINS = (
    "_builtin_models",
    "_builtin_memory",
    "_builtin_agents",
    "_builtin_teams",
    "_builtin_swarms",
    "_builtin_workflows",
    "_builtin_stores",
    "_builtin_remote",
    "_builtin_functions",
    "_builtin_agent_views",
    "_builtin_mcp",
    "_builtin_cassettes",
    "_builtin_loop",
)


def _load_builtins() -> None:
    """Import every built-in adapter module, reporting all failures together."""
    failures: list[str] = []
    for name in _BUILTINS:
        try:
            importlib.import_module(f"{__name__}.{name}")
        except Exception as exc:  # collected, raised together below
            failures.append(f"{name}: {type(exc).__name__}: {exc}")
    if failures:
        raise ConfigurationError(
            "cantata.declarative could not register its built-in components: " + "; ".join(failures)
        )


_load_builtins()

from ._builtin_workflows import workflow_agents  # noqa: E402
from .errors import (  # noqa: E402
    SpecError,
    UnknownToolError,
    UnresolvedPlaceholderError,
    UntrustedProviderError,
)
from .loader import (  # noqa: E402
    MAX_SPEC_BYTES,
    SPEC_SUFFIXES,
    AgentRef,
    SpecType,
    load,
    parse_spec,
    register_spec_type,
    spec_types,
)
from .placeholders import find_placeholders, resolve_placeholders  # noqa: E402
from .registry import (  # noqa: E402
    ComponentAdapter,
    ConfigContext,
    from_config,
    provider_of,
    register_component,
    registered_providers,
    to_config,
)
from .schema import spec_schema  # noqa: E402
from .spec_models import (  # noqa: E402
    SPEC_VERSION,
    AgentSpec,
    RemoteAgentSpec,
    TeamSpec,
    WorkflowSpec,
)

__all__ = [
    "MAX_SPEC_BYTES",
    "SPEC_SUFFIXES",
    "SPEC_VERSION",
    "AgentRef",
    "AgentSpec",
    "ComponentAdapter",
    "ConfigContext",
    "RemoteAgentSpec",
    "SpecError",
    "SpecType",
    "TeamSpec",
    "UnknownToolError",
    "UnresolvedPlaceholderError",
    "UntrustedProviderError",
    "WorkflowSpec",
    "find_placeholders",
    "from_config",
    "load",
    "parse_spec",
    "provider_of",
    "register_component",
    "register_spec_type",
    "registered_providers",
    "resolve_placeholders",
    "spec_schema",
    "spec_types",
    "to_config",
    "workflow_agents",
]
