"""The errors of declarative loading: each names the spec field, placeholder, provider or
tool involved and says what to do. All are `ConfigurationError`s (a definition is
invalid), so ``except ValueError`` written for plain Python keeps working."""

from __future__ import annotations

from ..core import ConfigurationError

__all__ = ["SpecError", "UnknownToolError", "UnresolvedPlaceholderError", "UntrustedProviderError"]


class SpecError(ConfigurationError):
    """A spec or a component config is malformed: bad YAML, wrong types, unknown fields."""


class UnresolvedPlaceholderError(SpecError):
    """A ``${Env:NAME}`` or ``${Settings:key}`` placeholder has no value."""


class UntrustedProviderError(SpecError):
    """A component config names a provider outside cantata and the caller's allow list."""


class UnknownToolError(SpecError):
    """A tool reference matches neither the tools passed in nor the allowed import paths."""
