"""What loading a config may use besides its text (`ConfigContext`).

A leaf module: the registry builds components with it and tool references resolve against
it, so both import it and neither imports the other back."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ConfigContext"]


@dataclass(frozen=True)
class ConfigContext:
    """What loading may use besides the text: tools and agents the caller passed, import
    path prefixes the caller allows (for providers and tools), settings and secrets."""

    tools: Mapping[str, Any] = field(default_factory=dict)
    agents: Mapping[str, Any] = field(default_factory=dict)
    allow: tuple[str, ...] = ()
    settings: Mapping[str, Any] = field(default_factory=dict)
    include_secrets: bool = False

    def allows(self, path: str) -> bool:
        """True when `path` is one of the allowed import paths or inside one."""
        return any(path == p or path.startswith(p + ".") for p in self.allow)
