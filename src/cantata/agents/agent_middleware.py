"""Agent middleware: code around a whole agent run (input, thread, options, the response).

Chat and function middleware (from `cantata.tools`) see single model calls and tool calls;
agent middleware sees the run: it can rewrite the input or options before ``call_next``,
read or replace the response after it, or answer by itself without calling it at all. The
same middleware serves `run` and `run_stream`: when streaming, updates reach the caller as
they are produced while the middleware waits in ``call_next``.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..core import AgentError, CancellationToken, Message
from ..models import ChatOptions
from .response import AgentResponse, AgentResponseUpdate

if TYPE_CHECKING:
    from .agent import Agent
    from .thread import AgentThread

__all__ = ["AgentMiddleware", "AgentRunContext", "agent_middleware"]

AgentNext = Callable[[], Awaitable[None]]
AgentProcess = Callable[["AgentRunContext", AgentNext], Awaitable[None]]


@dataclass(slots=True, kw_only=True)
class AgentRunContext:
    """One agent run as middleware sees it. Change `messages`, `options`, `arguments`,
    `instructions_override` or `kwargs` (the tool keyword arguments) before ``call_next``;
    read or replace `response` after it; set `response` and skip ``call_next`` to answer
    without running the agent. `options` already hold the call's keyword chat options."""

    agent: Agent
    messages: list[Message]
    thread: AgentThread | None
    arguments: Mapping[str, Any] | None = None
    options: ChatOptions | None = None
    tools: Sequence[Any] | None = None
    kwargs: dict[str, Any] = field(default_factory=dict)
    cancellation_token: CancellationToken | None = None
    is_streaming: bool = False
    response: AgentResponse | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    instructions_override: str | None = None
    context_messages: list[Message] = field(default_factory=list)
    """Messages for this run's model request only (never recorded in the thread): what
    the agent's context providers added, after its instructions and before the history."""
    loop_middleware: list[Any] = field(default_factory=list)
    """Chat and function middleware for this run's model and tool calls only, outside the
    agent's own (its guardrails and usage limits put theirs here)."""


class AgentMiddleware(ABC):
    """Wraps agent runs; pass instances in a `ChatAgent`'s ``middleware=``."""

    @abstractmethod
    async def process(self, context: AgentRunContext, call_next: AgentNext) -> None:
        """Do something before and/or after ``await call_next()``."""


class _AgentFunction(AgentMiddleware):
    def __init__(self, fn: AgentProcess) -> None:
        self._fn = fn

    def __repr__(self) -> str:
        return f"agent_middleware({getattr(self._fn, '__name__', self._fn)!r})"

    async def process(self, context: AgentRunContext, call_next: AgentNext) -> None:
        await self._fn(context, call_next)


def agent_middleware(fn: AgentProcess) -> AgentMiddleware:
    """Make ``async def fn(context, call_next)`` an `AgentMiddleware`."""
    return _AgentFunction(fn)


async def run_chain(
    middleware: Sequence[AgentMiddleware],
    context: AgentRunContext,
    final: Callable[[AgentRunContext], Awaitable[None]],
) -> AgentResponse:
    """Run the middleware (first listed outermost) around `final`; returns the response."""

    async def call(index: int) -> None:
        if index == len(middleware):
            await final(context)
            return
        await middleware[index].process(context, lambda: call(index + 1))

    await call(0)
    if context.response is None:
        raise AgentError(
            f"agent `{context.agent.name}`: its middleware finished without a response; "
            "a middleware must `await call_next()` or set `context.response`"
        )
    return context.response


async def stream_chain(
    middleware: Sequence[AgentMiddleware],
    context: AgentRunContext,
    open_stream: Callable[[AgentRunContext], Any],
) -> AsyncIterator[AgentResponseUpdate]:
    """Stream a run through the middleware: the chain runs in a task and the innermost
    step hands each update over as it comes, in lockstep with the caller (the run goes on
    only when the caller asks for the next update, so middleware code after ``call_next``
    runs after the caller has seen every update)."""
    queue: asyncio.Queue[AgentResponseUpdate] = asyncio.Queue(maxsize=1)
    forwarded = False

    async def final(ctx: AgentRunContext) -> None:
        nonlocal forwarded
        stream = open_stream(ctx)
        async for update in stream:
            forwarded = True
            await queue.put(update)
            await queue.join()  # until the caller has taken it and asks for the next
        ctx.response = stream.response

    chain = asyncio.create_task(run_chain(middleware, context, final))
    try:
        while True:
            getter = asyncio.ensure_future(queue.get())
            await asyncio.wait({getter, chain}, return_when=asyncio.FIRST_COMPLETED)
            if getter.done():
                yield getter.result()
                queue.task_done()
                continue
            getter.cancel()
            break
        response = chain.result()  # raises what the chain raised
        if not forwarded:  # a middleware answered by itself: stream its messages whole
            for message in response.messages:
                yield AgentResponseUpdate(
                    list(message.contents),
                    role=message.role,
                    author_name=message.author_name,
                    message_id=message.message_id,
                    agent_id=response.agent_id,
                    response_id=response.response_id,
                )
    finally:
        if not chain.done():
            chain.cancel()
            await asyncio.gather(chain, return_exceptions=True)
