"""One turn of a `ChatAgent`, forward: check, take the thread, render the instructions and
tools, record the input, read the history (and reduce it), run the tool loop with every
message it produces going to the recorder, record the rest, return the response.

`run_turn` and `stream_turn` are that path, whole; the agent around them adds only its
middleware. The thread is written by the run's `Recorder` alone.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Coroutine, Mapping, Sequence
from typing import Any, Protocol

from ..core import Message, UsageError
from ..core.retry import RetryPolicy
from ..models import ChatOptions, ChatResponse, ChatResponseUpdate
from ..tools import FunctionInvokingChatClient, FunctionTool
from ..tools.invoking import RECORDED
from .agent import AgentInput
from .agent_middleware import AgentRunContext
from .recorder import Recorder
from .reducers import HistoryReducer
from .response import AgentResponse, AgentResponseStream, AgentResponseUpdate
from .thread import AgentThread, messages_now
from .tool_like import as_tools

__all__ = ["TurnAgent", "run_turn", "stream_turn"]

_log = logging.getLogger("cantata.agents")


class TurnAgent(Protocol):
    """What a turn reads from its agent (a `ChatAgent`), declared here so that this module
    needs nothing from the one that calls it."""

    retry_policy: RetryPolicy | None
    history_reducer: HistoryReducer | None
    _loop: FunctionInvokingChatClient
    _call_tools: tuple[FunctionTool, ...]
    _reduce_before_loop: bool

    @property
    def name(self) -> str: ...
    @property
    def id(self) -> str: ...
    @property
    def closed(self) -> bool: ...
    @property
    def options(self) -> ChatOptions: ...
    def _thread_for_run(self, thread: AgentThread | None) -> AgentThread: ...
    def _incoming(self, messages: AgentInput) -> list[Message]: ...
    def _render_instructions(
        self, arguments: Mapping[str, Any] | None, override: str | None = None
    ) -> str | None: ...


_Started = tuple[AgentThread, list[Message], ChatOptions, Sequence[FunctionTool]]


def _start(
    agent: TurnAgent, ctx: AgentRunContext, recorder: Recorder
) -> _Started | Coroutine[Any, Any, _Started]:
    """Up to the loop: the checks, the thread (recorded on `ctx` so a retry continues on
    it), the input recorded, and the request: history, instructions, options, tools. The
    request itself when nothing has to be awaited for it (a turn on an in-memory thread
    without a reducer, as a team's are: no coroutine for it), else a coroutine of it."""
    if ctx.cancellation_token is not None:
        ctx.cancellation_token.raise_if_cancelled()
    if agent.closed:
        raise UsageError(
            f"agent `{agent.name}` was closed (aclose, or the end of its `async with`); "
            "make a new agent to run again"
        )
    thread = agent._thread_for_run(ctx.thread)
    instructions = agent._render_instructions(ctx.arguments, ctx.instructions_override)
    call_tools: Sequence[FunctionTool] = agent._call_tools  # only read: no copy
    if ctx.tools:
        call_tools = [*agent._call_tools, *as_tools(ctx.tools, owner=agent.name)]
    pending = recorder.record_input(thread, agent._incoming(ctx.messages) if ctx.messages else [])
    if pending is RECORDED and not (
        agent._reduce_before_loop and agent.history_reducer is not None
    ):
        ctx.thread = thread
        history = messages_now(thread)
        if history is not None:
            return _request(agent, ctx, thread, history, instructions, call_tools)
    return _start_later(agent, ctx, thread, pending, instructions, call_tools)


async def _start_later(
    agent: TurnAgent,
    ctx: AgentRunContext,
    thread: AgentThread,
    pending: Any,
    instructions: str | None,
    call_tools: Sequence[FunctionTool],
) -> _Started:
    """`_start`'s end where something is awaited: the input's recording, the thread's
    messages, the reducer."""
    if pending is not RECORDED:
        await pending
    ctx.thread = thread
    history = messages_now(thread)
    if history is None:
        history = await thread.get_messages()
    if agent._reduce_before_loop and agent.history_reducer is not None:
        history = await agent.history_reducer.reduce(history)
    return _request(agent, ctx, thread, history, instructions, call_tools)


def _request(
    agent: TurnAgent,
    ctx: AgentRunContext,
    thread: AgentThread,
    history: list[Message],
    instructions: str | None,
    call_tools: Sequence[FunctionTool],
) -> _Started:
    if ctx.context_messages:  # for this request only, before the conversation
        history[0:0] = ctx.context_messages
    if instructions:  # in front, for this request only
        history.insert(0, Message("system", instructions, author_name=agent.name))
    if _log.isEnabledFor(logging.DEBUG):
        _log.debug(
            "agent %s: run on thread %s (%s), %d new message(s), %d in the request, "
            "%d tool(s) for the call, streaming=%s",
            agent.name,
            thread.id,
            type(thread).__name__,
            len(ctx.messages),
            len(history),
            len(call_tools),
            ctx.is_streaming,
        )
    options = agent.options if ctx.options is None else agent.options.merge(ctx.options)
    return thread, history, options, call_tools


async def run_turn(agent: TurnAgent, ctx: AgentRunContext, recorder: Recorder) -> AgentResponse:
    """Run one turn to its final answer."""
    try:
        started = _start(agent, ctx, recorder)
        if not isinstance(started, tuple):
            started = await started
        thread, history, options, call_tools = started
        response = await agent._loop.get_response(
            history,
            options=options,
            cancellation_token=ctx.cancellation_token,
            tools=call_tools,
            on_message=recorder.on_message,
            tool_kwargs=ctx.kwargs,
            retry_policy=agent.retry_policy,
            middleware=ctx.loop_middleware,
        )
        return _response(agent, await recorder.drain(response.messages), thread, response)
    except BaseException as exc:
        _log_failure(agent.name, exc)
        raise


def stream_turn(agent: TurnAgent, ctx: AgentRunContext, recorder: Recorder) -> AgentResponseStream:
    """Run one turn, streaming its answer as the model writes it."""
    result: list[AgentResponse] = []

    async def updates() -> AsyncIterator[AgentResponseUpdate]:
        try:
            async with contextlib.aclosing(streamed()) as inner:  # closed now if we stop
                async for update in inner:
                    yield update
        except BaseException as exc:
            _log_failure(agent.name, exc)
            raise

    async def streamed() -> AsyncGenerator[AgentResponseUpdate, None]:
        started = _start(agent, ctx, recorder)
        if not isinstance(started, tuple):
            started = await started
        thread, history, options, call_tools = started
        chunks: list[ChatResponseUpdate] = []
        stream = agent._loop.get_streaming_response(
            history,
            options=options,
            cancellation_token=ctx.cancellation_token,
            tools=call_tools,
            on_message=recorder.on_message,
            tool_kwargs=ctx.kwargs,
            retry_policy=agent.retry_policy,
            middleware=ctx.loop_middleware,
        )
        try:
            async for update in stream:
                chunks.append(update)
                if not update.contents:
                    continue
                yield AgentResponseUpdate(
                    update.contents,
                    role=update.role,
                    author_name=update.author_name or agent.name,
                    message_id=update.message_id,
                    agent_id=agent.id,
                    response_id=update.response_id,
                )
        finally:
            close = getattr(stream, "aclose", None)
            if close is not None:  # stop the loop now when the caller stops early
                await close()
        response = ChatResponse.from_updates(chunks, response_format=options.response_format)
        produced = await recorder.drain(response.messages)
        result.append(_response(agent, produced, thread, response))

    return AgentResponseStream(updates(), lambda: result[-1])


def _response(
    agent: TurnAgent, produced: list[Message], thread: AgentThread, response: ChatResponse
) -> AgentResponse:
    """The turn's response, from the messages it recorded and the loop's answer."""
    if _log.isEnabledFor(logging.DEBUG):
        _log.debug(
            "agent %s: run done, finish reason %s, %d message(s), usage %s",
            agent.name,
            response.finish_reason,
            len(produced),
            response.usage,
        )
    return AgentResponse(
        produced,
        thread=thread,
        usage=response.usage,
        value=response.value,
        agent_id=agent.id,
        finish_reason=response.finish_reason,
        response_id=response.response_id,
    )


def _log_failure(agent_name: str, exc: BaseException) -> None:
    if isinstance(exc, GeneratorExit):
        return  # the caller stopped reading a stream: not a failure
    _log.debug("agent %s: run ended by %s: %s", agent_name, type(exc).__name__, exc)
