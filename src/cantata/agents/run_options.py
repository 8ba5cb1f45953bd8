"""The keyword arguments of every agent's `run` / `run_stream` (`RunKeywords`), and the chat
options among them.

`RunKeywords` is the one definition of the run signature: every agent kind writes
``run(self, messages=None, **kw: Unpack[RunKeywords])`` and reads what it uses from `kw`,
so a parameter added here reaches all of them, and type checkers check every call.

Agent Framework users write ``agent.run("...", response_format=Colour, temperature=0)``.
These keywords are the fields of `ChatOptions`; anything else is refused with the list of
valid names, never passed on silently (tool keyword arguments have their own parameter,
``tool_kwargs=``), so a misspelled option fails at once instead of changing nothing.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, TypeAlias, TypedDict

from pydantic import BaseModel

from ..core import CancellationToken, Message, UsageError
from ..models import ChatOptions, ResponseFormat, ToolChoice

if TYPE_CHECKING:
    from .thread import AgentThread

__all__ = [
    "CHAT_OPTION_KEYWORDS",
    "RUN_KEYWORDS",
    "ChatOptionKeywords",
    "IntermediateCallback",
    "RunKeywords",
    "UnknownOptionError",
    "call_options",
    "chat_keywords",
]

IntermediateCallback: TypeAlias = Callable[[Message], Awaitable[None] | None]
"""Called with every intermediate message of a run (tool calls, tool results) as it happens."""


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


class RunKeywords(ChatOptionKeywords, total=False):
    """Every keyword of `run` and `run_stream`, all optional: the run's own, then the chat
    options (`ChatOptionKeywords`), which override the same fields of ``options=``.

    ``thread``: the conversation to continue (a new one when absent). ``on_intermediate``:
    sees tool calls and results as they happen. ``arguments``: fill the instructions
    template. ``options``: the call's `ChatOptions`. ``tools``: more tools for this call.
    ``tool_kwargs``: reach tools through `ToolContext.kwargs`. ``instructions_override``:
    replaces the agent's instructions for this call only (rendered with the same
    arguments; never stored on the agent). ``cancellation_token``: ends the run."""

    thread: AgentThread | None
    on_intermediate: IntermediateCallback | None
    arguments: Mapping[str, Any] | None
    options: ChatOptions | None
    tools: Iterable[Any] | None
    tool_kwargs: Mapping[str, Any] | None
    instructions_override: str | None
    cancellation_token: CancellationToken | None


RUN_KEYWORDS: frozenset[str] = frozenset(RunKeywords.__annotations__) - CHAT_OPTION_KEYWORDS
"""The names of the run's own keywords (`RunKeywords` less the chat options)."""

_NONE: dict[str, Any] = {}


def chat_keywords(kw: Mapping[str, Any]) -> Mapping[str, Any]:
    """The keywords of a `run` call that are not the run's own: its chat options (and any
    unknown name, which `call_options` refuses). Only read: never change what it returns."""
    if kw.keys() <= RUN_KEYWORDS:  # the usual call: no chat options
        return _NONE
    return {k: v for k, v in kw.items() if k not in RUN_KEYWORDS}


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
