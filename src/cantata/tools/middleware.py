"""Middleware around model calls and tool calls, in ``process(context, call_next)`` style.

A middleware can observe a call, change its context (rewrite messages, options or
arguments), skip ``call_next`` and set the outcome itself (short-circuit), or set
``context.terminate = True`` so the function loop stops after the current step. The first
middleware listed is the outermost. ``call_next()`` may be awaited with no argument, with
the context, or with a new one (``dataclasses.replace(context, ...)``): the rest of the
chain then runs with the new context, and what it decides (the response, or the result
and error, and ``terminate``) is copied back to the context the middleware was given.
"""

from __future__ import annotations

import functools
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from ..core import CancellationToken, FunctionCallContent, Message
from ..models import ChatClient, ChatOptions, ChatResponse

if TYPE_CHECKING:
    from .tool import FunctionTool

__all__ = [
    "ChatContext",
    "ChatMiddleware",
    "ChatNext",
    "FunctionInvocationContext",
    "FunctionMiddleware",
    "FunctionNext",
    "chat_middleware",
    "function_middleware",
]

C = TypeVar("C")
C_contra = TypeVar("C_contra", contravariant=True)


def _empty() -> Mapping[str, Any]:
    return MappingProxyType({})


@dataclass(slots=True, kw_only=True)
class ChatContext:
    """One model call as middleware sees it. Set `response` and skip ``call_next`` to answer
    without the model; set `terminate` to end the loop after this call.

    `messages` and `options` belong to this call: the messages are copies (a new list,
    new contents lists and metadata dicts; the content objects themselves are shared, so
    replace a content rather than editing it) and the options a copy, so changing them
    changes this request only, never the conversation, the caller's messages or the next
    turn. Each message is copied when first read (copy-on-read), so a middleware that does
    not look at the messages adds no cost that grows with the conversation.

    When `is_streaming`, ``call_next`` streams the model's updates to the caller as they
    come and then sets `response`; replacing `response` afterwards, or calling
    ``call_next`` a second time (a retry), changes what the loop continues with, not the
    chunks already streamed.
    """

    client: ChatClient
    messages: list[Message]
    options: ChatOptions
    is_streaming: bool = False
    response: ChatResponse | None = None
    terminate: bool = False
    metadata: dict[str, Any] = field(default_factory=dict)
    kwargs: Mapping[str, Any] = field(default_factory=_empty)
    cancellation_token: CancellationToken | None = None


@dataclass(slots=True, kw_only=True)
class FunctionInvocationContext:
    """One tool call as middleware sees it. Rewrite `arguments` before ``call_next``; set
    `result` (or `error`) and skip ``call_next`` to answer without running the tool; set
    `terminate` to end the loop once this turn's calls are done."""

    function: FunctionTool
    call: FunctionCallContent
    arguments: dict[str, Any]
    result: Any = None
    error: Exception | None = None
    """The exception the tool raised; the model gets it as an error result."""
    terminate: bool = False
    metadata: dict[str, Any] = field(default_factory=dict)
    kwargs: Mapping[str, Any] = field(default_factory=_empty)
    cancellation_token: CancellationToken | None = None
    approved: bool = False


class _Next(Protocol[C_contra]):
    def __call__(self, context: C_contra | None = None, /) -> Awaitable[None]: ...


ChatNext = _Next[ChatContext]
"""The rest of the chain, then the model: ``await call_next()``."""
FunctionNext = _Next[FunctionInvocationContext]
"""The rest of the chain, then the tool: ``await call_next()``."""


class ChatMiddleware(ABC):
    """Wraps every model call the function loop makes."""

    @abstractmethod
    async def process(self, context: ChatContext, call_next: ChatNext) -> None:
        """Do something around ``await call_next()`` (or instead of it)."""


class FunctionMiddleware(ABC):
    """Wraps every tool call the function loop makes."""

    @abstractmethod
    async def process(self, context: FunctionInvocationContext, call_next: FunctionNext) -> None:
        """Do something around ``await call_next()`` (or instead of it)."""


ChatProcess = Callable[[ChatContext, ChatNext], Awaitable[None]]
FunctionProcess = Callable[[FunctionInvocationContext, FunctionNext], Awaitable[None]]


class _ChatFunction(ChatMiddleware):
    def __init__(self, fn: ChatProcess) -> None:
        self._fn = fn
        self.__doc__ = fn.__doc__

    def __repr__(self) -> str:
        return f"{type(self).__name__}({getattr(self._fn, '__qualname__', self._fn)!r})"

    async def process(self, context: ChatContext, call_next: ChatNext) -> None:
        await self._fn(context, call_next)


class _FunctionFunction(FunctionMiddleware):
    def __init__(self, fn: FunctionProcess) -> None:
        self._fn = fn
        self.__doc__ = fn.__doc__

    def __repr__(self) -> str:
        return f"{type(self).__name__}({getattr(self._fn, '__qualname__', self._fn)!r})"

    async def process(self, context: FunctionInvocationContext, call_next: FunctionNext) -> None:
        await self._fn(context, call_next)


def chat_middleware(fn: ChatProcess) -> ChatMiddleware:
    """Make ``async def fn(context, call_next)`` a `ChatMiddleware`."""
    return _ChatFunction(fn)


def function_middleware(fn: FunctionProcess) -> FunctionMiddleware:
    """Make ``async def fn(context, call_next)`` a `FunctionMiddleware`."""
    return _FunctionFunction(fn)


class _HasProcess(Protocol, Generic[C]):
    async def process(self, context: C, call_next: _Next[C]) -> None: ...


def compose(
    middleware: Sequence[_HasProcess[C]], innermost: Callable[[C], Awaitable[None]]
) -> Callable[[C], Awaitable[None]]:
    """Chain middleware around `innermost`; the first is the outermost (`innermost` itself
    when there is none: one coroutine less on every call)."""
    if not middleware:
        return innermost

    async def run(index: int, context: C) -> None:
        if index == len(middleware):
            await innermost(context)
            return

        async def call_next(next_context: C | None = None, /) -> None:
            if next_context is None or next_context is context:
                await run(index + 1, context)
                return
            await run(index + 1, next_context)
            _adopt_outcome(context, next_context)

        await middleware[index].process(context, call_next)

    return functools.partial(run, 0)


def _adopt_outcome(context: object, inner: object) -> None:
    """A middleware handed ``call_next`` a new context (say, ``dataclasses.replace(context,
    messages=...)``): what the rest of the chain decided is copied back to the context the
    middleware itself was given, which is the one its callers (and the loop) read."""
    if isinstance(context, ChatContext) and isinstance(inner, ChatContext):
        context.response = inner.response
        context.terminate = inner.terminate
    elif isinstance(context, FunctionInvocationContext) and isinstance(
        inner, FunctionInvocationContext
    ):
        context.result = inner.result
        context.error = inner.error
        context.terminate = inner.terminate
