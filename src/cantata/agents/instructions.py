"""Instructions as templates: Jinja2 in a sandbox, rendered on every call.

Why a sandbox: arguments often come from users or other agents, and a template must not
reach Python internals through them, nor change the arguments it is given (which would
leak from one call into the next). Why strict: a missing argument is a bug that should
say its name, not a silently empty prompt.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jinja2 import StrictUndefined, TemplateError, UndefinedError
from jinja2.sandbox import ImmutableSandboxedEnvironment

from ..core import ConfigurationError

__all__ = ["InstructionTemplate", "merge_arguments"]

# Immutable: a template calling ``items.append(...)`` on an argument would change the
# agent's default arguments (or the caller's objects) and leak into every later call.
_ENV = ImmutableSandboxedEnvironment(
    undefined=StrictUndefined, autoescape=False, keep_trailing_newline=True
)


class InstructionTemplate:
    """A compiled instruction template; `render` fills it with one call's arguments."""

    __slots__ = ("_template", "owner", "source")

    def __init__(self, source: str, *, owner: str = "agent") -> None:
        self.source = source
        self.owner = owner
        if "{{" not in source and "{%" not in source and "{#" not in source:
            self._template = None
            return
        try:
            self._template = _ENV.from_string(source)
        except TemplateError as exc:
            raise ConfigurationError(
                f"instructions of agent `{owner}` are not a valid Jinja2 template: {exc}"
            ) from exc

    @property
    def is_static(self) -> bool:
        """True when the instructions have no template syntax (rendering is free)."""
        return self._template is None

    def render(self, arguments: Mapping[str, Any]) -> str:
        """The instructions for one call; a missing argument raises `ConfigurationError`."""
        template = self._template
        if template is None:
            return self.source
        try:
            return template.render(dict(arguments))
        except UndefinedError as exc:
            raise ConfigurationError(
                f"instructions of agent `{self.owner}` need an argument that was not given "
                f"({exc.message}); pass it in `arguments=` to the agent or to the call"
            ) from exc
        except Exception as exc:
            # Also what the template's own expressions raise (``{{ 1 / 0 }}``, a range the
            # sandbox finds too large, an argument's failing method): the caller gets one
            # typed error naming the agent, never a bare ZeroDivisionError from deep inside.
            raise ConfigurationError(
                f"instructions of agent `{self.owner}` failed to render: "
                f"{type(exc).__name__}: {exc}"
            ) from exc


def merge_arguments(
    agent_arguments: Mapping[str, Any], call_arguments: Mapping[str, Any] | None
) -> dict[str, Any]:
    """A fresh dict: the agent's arguments overridden by the call's (neither is changed)."""
    merged = dict(agent_arguments)
    if call_arguments:
        merged.update(call_arguments)
    return merged
