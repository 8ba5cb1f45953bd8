"""Instructions as templates: Jinja2 in a sandbox, rendered on every call.

Why a sandbox: arguments often come from users or other agents, and a template must not
reach Python internals through them, nor change the arguments it is given (which would
leak from one call into the next). Why strict: a missing argument is a bug that should
say its name, not a silently empty prompt. Why bounded: a template and its arguments can
ask for 100 MB of text or minutes of looping; a rendering may write at most
`MAX_RENDER_CHARS` characters and take at most `MAX_RENDER_SECONDS` seconds (per template:
``InstructionTemplate(source, max_chars=..., max_seconds=...)``), else `ConfigurationError`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from jinja2 import TemplateError, UndefinedError

from ..core import ConfigurationError
from ._render_budget import BoundedSandbox, Budget, RenderLimitError, render_within

__all__ = ["MAX_RENDER_CHARS", "MAX_RENDER_SECONDS", "InstructionTemplate", "merge_arguments"]

MAX_RENDER_CHARS = 200_000
"""Default most characters one rendering of instructions may write (about 50,000 tokens,
far more than any model's instructions need)."""
MAX_RENDER_SECONDS = 2.0
"""Default most seconds one rendering of instructions may take."""

# Immutable: a template calling ``items.append(...)`` on an argument would change the
# agent's default arguments (or the caller's objects) and leak into every later call.
_ENV = BoundedSandbox()


class InstructionTemplate:
    """A compiled instruction template; `render` fills it with one call's arguments."""

    __slots__ = ("_template", "max_chars", "max_seconds", "owner", "source")

    def __init__(
        self,
        source: str,
        *,
        owner: str = "agent",
        max_chars: int = MAX_RENDER_CHARS,
        max_seconds: float = MAX_RENDER_SECONDS,
    ) -> None:
        if isinstance(max_chars, bool) or not isinstance(max_chars, int) or max_chars < 1:
            raise ConfigurationError(
                f"instructions of agent `{owner}`: max_chars must be a positive int, "
                f"got {max_chars!r}"
            )
        if (
            isinstance(max_seconds, bool)
            or not isinstance(max_seconds, int | float)
            or not math.isfinite(max_seconds)
            or max_seconds <= 0
        ):
            raise ConfigurationError(
                f"instructions of agent `{owner}`: max_seconds must be a finite number > 0, "
                f"got {max_seconds!r}"
            )
        self.source = source
        self.owner = owner
        self.max_chars = max_chars
        self.max_seconds = float(max_seconds)
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
        budget = Budget(self.max_chars, self.max_seconds)
        values = dict(arguments)
        try:
            return render_within(budget, lambda: template.generate(values))
        except RenderLimitError as exc:
            raise ConfigurationError(
                f"instructions of agent `{self.owner}` went past a rendering limit: the "
                f"rendering {exc} (limits: {self.max_chars:,} characters, "
                f"{self.max_seconds:g} s); shorten the template or what its arguments make "
                "it repeat, or give the InstructionTemplate larger max_chars / max_seconds"
            ) from None
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
