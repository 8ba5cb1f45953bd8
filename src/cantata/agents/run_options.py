"""Chat options given to `run` / `run_stream` as keyword arguments.

Agent Framework users write ``agent.run("...", response_format=Colour, temperature=0)``.
These keywords are the fields of `ChatOptions`; anything else is refused with the list of
valid names, never passed on silently (tool keyword arguments have their own parameter,
``tool_kwargs=``), so a misspelled option fails at once instead of changing nothing.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Mapping
from typing import Any, TypedDict

from pydantic import BaseModel

from ..core import UsageError
from ..models import ChatOptions, ResponseFormat, ToolChoice

__all__ = ["CHAT_OPTION_KEYWORDS", "ChatOptionKeywords", "UnknownOptionError", "call_options"]


class ChatOptionKeywords(TypedDict, total=False):
    """The chat options `run` and `run_stream` take as keyword arguments; each overrides
    the same field of the call's ``options=`` (and the agent's defaults) for that call."""

    model: str
    temperature: float
    top_p: float
    max_tokens: int
    stop: list[str]
    seed: int
    tool_choice: ToolChoice
    response_format: ResponseFormat
    extra: dict[str, Any]


CHAT_OPTION_KEYWORDS: frozenset[str] = frozenset(ChatOptionKeywords.__annotations__)
"""The names `ChatOptionKeywords` allows."""


class UnknownOptionError(UsageError, TypeError):
    """`run` got a keyword argument that is no chat option (also a `TypeError`, as Python's
    own unexpected-keyword error is); `names` are the unknown ones."""

    def __init__(self, message: str, *, agent_name: str, names: list[str]) -> None:
        super().__init__(message)
        self.agent_name = agent_name
        self.names = names


def call_options(
    agent_name: str, options: ChatOptions | None, keywords: Mapping[str, Any]
) -> ChatOptions | None:
    """`options` with the keyword chat options laid over it (they win); raises
    `UnknownOptionError` for a name that is no chat option and `UsageError` for a value of
    the wrong kind."""
    if not keywords:
        return options
    unknown = sorted(k for k in keywords if k not in CHAT_OPTION_KEYWORDS)
    if unknown:
        raise UnknownOptionError(
            _unknown_text(agent_name, unknown), agent_name=agent_name, names=unknown
        )
    for name, value in keywords.items():
        _check(agent_name, name, value)
    given = ChatOptions(**{k: v for k, v in keywords.items() if v is not None})
    return (options or ChatOptions()).merge(given)


def _unknown_text(agent_name: str, unknown: list[str]) -> str:
    hints = []
    for name in unknown:
        close = difflib.get_close_matches(name, CHAT_OPTION_KEYWORDS, n=1)
        if close:
            hints.append(f"did you mean {close[0]!r} for {name!r}?")
    listed = ", ".join(sorted(CHAT_OPTION_KEYWORDS))
    hint = f" ({'; '.join(hints)})" if hints else ""
    shown = ", ".join(repr(n[:60]) for n in unknown[:5])
    return (
        f"agent `{agent_name}`: run got unknown keyword argument(s) {shown}{hint}; the chat "
        f"options it takes as keywords are: {listed}. Pass values for tools in "
        "tool_kwargs={...} and template values in arguments={...}"
    )


def _check(agent_name: str, name: str, value: Any) -> None:
    """A value of the wrong kind would reach the model server (or be ignored) far from
    the call that made the mistake; say so here."""
    if value is None:
        return
    problem: str | None = None
    if name in ("temperature", "top_p"):
        if isinstance(value, bool) or not isinstance(value, int | float):
            problem = "a number"
        elif not math.isfinite(value) or value < 0:
            problem = "a finite number >= 0"
    elif name in ("max_tokens", "seed"):
        if isinstance(value, bool) or not isinstance(value, int):
            problem = "an int"
        elif name == "max_tokens" and value < 1:
            problem = "an int >= 1"
    elif name in ("model", "tool_choice"):
        if not isinstance(value, str):
            problem = "a string"
    elif name == "stop":
        if not isinstance(value, list) or not all(isinstance(s, str) for s in value):
            problem = "a list of strings"
    elif name == "extra":
        if not isinstance(value, dict):
            problem = "a dict"
    elif name == "response_format" and not _is_response_format(value):
        problem = "a pydantic model class or a JSON schema dict"
    if problem is not None:
        raise UsageError(
            f"agent `{agent_name}`: chat option {name}= must be {problem}, got "
            f"{type(value).__name__} {_short(value)}"
        )


def _is_response_format(value: Any) -> bool:
    return isinstance(value, dict) or (isinstance(value, type) and issubclass(value, BaseModel))


def _short(value: Any) -> str:
    try:
        text = repr(value)
    except Exception:
        return "(unprintable)"
    return text if len(text) <= 60 else text[:57] + "..."
