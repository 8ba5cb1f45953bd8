"""`ChatAgent`: the local agent, a chat client plus tools, on a `LocalThread`.

One call: make sure the thread exists and append the new messages; read the thread back;
apply the history reducer; put the rendered instructions in front as a system message that
lives only in this request; run the function-invocation loop; append every message the
loop produced to the thread, in order, named with the agent's name and never twice (a
message with tool calls goes in together with their results, so a run that fails in between
leaves no call without its result); return.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterable, Mapping, Sequence
from typing import Any, TypeAlias, Unpack

from ..core import ConfigurationError, Message, UsageError
from ..core.retry import RetryPolicy
from ..models import ChatClient, ChatOptions, ChatResponse, ChatResponseUpdate
from ..tools import (
    ChatContext,
    ChatMiddleware,
    ChatNext,
    FunctionInvokingChatClient,
    FunctionMiddleware,
    FunctionTool,
    ToolMethod,
    plugin_tools,
    tool,
)
from .agent import Agent, AgentInput, IntermediateCallback
from .agent_middleware import AgentMiddleware, AgentRunContext, run_chain, stream_chain
from .closing import close_client
from .instructions import InstructionTemplate
from .message_store import MessageStoreFactory
from .recorder import Recorder
from .reducers import HistoryReducer
from .response import AgentResponse, AgentResponseStream, AgentResponseUpdate
from .run_options import RunKeywords, chat_keywords
from .thread import AgentThread, LocalThread, messages_now
from .tool_results_answer import DEFAULT_TOOL_RESULTS_FORMAT, AnswerWithToolResults, check_format

__all__ = ["ChatAgent", "ToolLike"]

_log = logging.getLogger("cantata.agents")

ToolLike: TypeAlias = FunctionTool | Agent | Callable[..., Any] | object
"""What an agent takes as a tool: a `FunctionTool`, another agent, a typed function, or a
plugin (an object whose ``@tool``-marked methods it offers, bound to the object)."""


class ChatAgent(Agent):
    """An agent backed by a `ChatClient`, with tools, instructions and a local thread.

    ``ChatAgent(client, name="helper", instructions="Be brief.", tools=[add])``. Tools may
    be `FunctionTool`s, plain typed functions (made tools with `@tool`), other agents
    (made tools with `as_tool`), or plugins: objects whose ``@tool``-marked methods are
    offered bound to the object (``tools=[MenuPlugin()]``, see `plugin_tools`).
    `options` are the agent's default `ChatOptions`; a call's options (and keyword chat
    options) override them for that call only. `message_store_factory` decides where new
    threads keep their messages (in memory by default; see `StateStoreMessageStore.factory`).
    `middleware` mixes `AgentMiddleware` (around each run) with the chat and function
    middleware of `cantata.tools` (around each model call and tool call).

    ``retry_policy`` (a `cantata.core.retry.RetryPolicy`) retries a model call that failed
    with an error of a class it retries (a timeout, a 429 or 5xx, a dropped connection by
    default), after a jittered backoff that the run's cancellation ends at once; never once
    part of a streamed answer was yielded to the caller (that failure is raised). Inside a
    durable workflow run the answer that finally came is the one journaled. Tools retry by
    their own policy (``@tool(retry_policy=...)``); a tool that raises
    `cantata.core.retry.NeedsPerson` ends the run with that error (in a workflow, the agent
    executor's run then stops with a request for input).

    After its tools ran the agent asks the model again, to answer with their results in
    view. With ``answer_with_tool_results=True`` it ends the turn with the results instead:
    one assistant message, a line per result written by ``tool_results_format`` (default
    ``"{result}"``; also ``{tool_name}``, ``{arguments}``, ``{is_error}``), as AutoGen's
    assistant does unless asked to reflect on tool use; a team turn then costs one model call.

    Ownership: the client belongs to the caller (one client often serves many agents), so
    closing the agent leaves it open; with ``owns_client=True`` the agent closes it in
    `aclose` (``async with ChatAgent(LocalChatClient(), owns_client=True) as agent:``),
    and a closed agent refuses to run.
    """

    thread_type = LocalThread

    def __init__(
        self,
        client: ChatClient,
        *,
        name: str = "agent",
        description: str = "",
        instructions: str | InstructionTemplate | None = None,
        tools: Iterable[ToolLike] = (),
        options: ChatOptions | None = None,
        middleware: Sequence[AgentMiddleware | ChatMiddleware | FunctionMiddleware] = (),
        message_store_factory: MessageStoreFactory | None = None,
        history_reducer: HistoryReducer | None = None,
        arguments: Mapping[str, Any] | None = None,
        id: str | None = None,
        max_iterations: int = 10,
        owns_client: bool = False,
        retry_policy: RetryPolicy | None = None,
        answer_with_tool_results: bool = False,
        tool_results_format: str = DEFAULT_TOOL_RESULTS_FORMAT,
    ) -> None:
        super().__init__(
            name=name,
            description=description,
            instructions=instructions,
            arguments=arguments,
            id=id,
        )
        if not isinstance(client, ChatClient):
            raise ConfigurationError(
                f"agent `{name}`: client {client!r} is not a ChatClient (it needs "
                "get_response and get_streaming_response)"
            )
        if retry_policy is not None and not isinstance(retry_policy, RetryPolicy):
            raise ConfigurationError(
                f"agent `{name}`: retry_policy must be a cantata.core.retry.RetryPolicy or "
                f"None, got {type(retry_policy).__name__}"
            )
        self.retry_policy = retry_policy
        """How a failed model call is tried again (None: as the client's loop does)."""
        self._tools: tuple[FunctionTool, ...] = tuple(_as_tools(tools, owner=name))
        # The reducer runs before every model call, inside the loop, as the innermost chat
        # middleware; a loop the caller built already is left alone and the reducer then
        # runs once per turn, before the loop.
        self._reduce_before_loop = False
        self._agent_middleware = tuple(m for m in middleware if isinstance(m, AgentMiddleware))
        loop_middleware = [m for m in middleware if not isinstance(m, AgentMiddleware)]
        self.answer_with_tool_results = bool(answer_with_tool_results)
        """Whether a turn that ran tools ends with their results (see `tool_results_answer`)."""
        self.tool_results_format = check_format(tool_results_format, owner=name)
        """The line each tool result becomes in that answer."""
        if self.answer_with_tool_results:
            if isinstance(client, FunctionInvokingChatClient):
                raise ConfigurationError(
                    f"agent `{name}`: answer_with_tool_results needs the agent's own tool loop; "
                    "pass the chat client itself, not a FunctionInvokingChatClient"
                )
            # outermost: a call it answers is no model call, so no other middleware sees it
            loop_middleware.insert(
                0, AnswerWithToolResults(self.tool_results_format, author_name=name)
            )
        if isinstance(client, FunctionInvokingChatClient) and not loop_middleware:
            self._loop: FunctionInvokingChatClient = client
            self._call_tools: tuple[FunctionTool, ...] = self._tools
            self._reduce_before_loop = history_reducer is not None
        else:
            layers = list(loop_middleware)
            if history_reducer is not None:
                layers.append(_ReduceEachCall(history_reducer))
            self._loop = FunctionInvokingChatClient(
                client,
                tools=self._tools,
                middleware=layers,
                max_iterations=max_iterations,
            )
            self._call_tools = ()
        self.max_iterations: int = self._loop.max_iterations
        """The model calls that asked for tools one run may make (the loop's own limit when
        `client` is a `FunctionInvokingChatClient` already)."""
        self.client = client
        self.owns_client = owns_client
        """Whether `aclose` closes the client too."""
        self._closed = False
        self._options = options or ChatOptions()
        self._message_store_factory = message_store_factory
        self.history_reducer = history_reducer
        """Shrinks each model request (never the thread); leading system messages stay."""

    @property
    def tools(self) -> tuple[FunctionTool, ...]:
        """The agent's own tools (a call's `tools=` are added for that call only)."""
        return self._tools

    @property
    def options(self) -> ChatOptions:
        """The agent's default options (a call's `options=` override them for that call)."""
        return self._options

    # -- lifecycle -------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        """True once `aclose` ran; a closed agent refuses to run."""
        return self._closed

    async def aclose(self) -> None:
        """Close the client when the agent owns it (``owns_client=True``); idempotent.
        Waits at most `CLOSE_TIMEOUT` seconds for the client."""
        if self._closed:
            return
        self._closed = True
        if self.owns_client:
            await close_client(self.client, owner=self.name)

    # -- threads ---------------------------------------------------------------------

    def create_thread(self) -> LocalThread:
        """A new local thread whose store comes from this agent's `message_store_factory`."""
        return LocalThread(message_store_factory=self._message_store_factory)

    async def deserialize_thread(self, data: Any) -> LocalThread:
        """Restore a thread that `thread.serialize()` wrote; it continues where it stopped."""
        return await LocalThread.deserialize(
            data, message_store_factory=self._message_store_factory
        )

    # -- running ---------------------------------------------------------------------

    def _context(
        self, messages: AgentInput, kw: RunKeywords, *, streaming: bool
    ) -> AgentRunContext:
        tool_kwargs = kw.get("tool_kwargs")
        tools = kw.get("tools")
        if tool_kwargs is not None and not isinstance(tool_kwargs, Mapping):
            raise UsageError(
                f"agent `{self.name}`: tool_kwargs must be a mapping of names to values, got "
                f"{type(tool_kwargs).__name__}"
            )
        return AgentRunContext(
            agent=self,
            messages=[] if messages is None else Message.coerce(messages),  # None: no call
            thread=kw.get("thread"),
            arguments=kw.get("arguments"),
            options=self._call_options(kw.get("options"), chat_keywords(kw)),
            tools=list(tools) if tools is not None else None,
            kwargs=dict(tool_kwargs or {}),
            cancellation_token=kw.get("cancellation_token"),
            is_streaming=streaming,
            instructions_override=kw.get("instructions_override"),
        )

    def _begin(
        self, ctx: AgentRunContext, log: _RunLog
    ) -> tuple[AgentThread, list[Message], str | None, Sequence[FunctionTool]]:
        """The synchronous start of a run: the checks, its thread, its instructions and
        tools, and the input not recorded yet."""
        if ctx.cancellation_token is not None:
            ctx.cancellation_token.raise_if_cancelled()
        if self._closed:
            raise UsageError(
                f"agent `{self.name}` was closed (aclose, or the end of its `async with`); "
                "make a new agent to run again"
            )
        thread = self._thread_for_run(ctx.thread)
        instructions = self._render_instructions(ctx.arguments, ctx.instructions_override)
        call_tools: Sequence[FunctionTool] = self._call_tools  # only read: no copy
        if ctx.tools:
            call_tools = [*self._call_tools, *_as_tools(ctx.tools, owner=self.name)]
        fresh = log.fresh(thread, self._incoming(ctx.messages) if ctx.messages else [])
        return thread, fresh, instructions, call_tools

    def _request(
        self,
        ctx: AgentRunContext,
        thread: AgentThread,
        history: list[Message],
        instructions: str | None,
        call_tools: Sequence[FunctionTool],
    ) -> ChatOptions:
        """Put the instructions in front of the request; the options of the call."""
        if instructions:
            history.insert(0, Message("system", instructions, author_name=self.name))
        if _log.isEnabledFor(logging.DEBUG):
            _log.debug(
                "agent %s: run on thread %s (%s), %d new message(s), %d in the request, "
                "%d tool(s) for the call, streaming=%s",
                self.name,
                thread.id,
                type(thread).__name__,
                len(ctx.messages),
                len(history),
                len(call_tools) + len(self._call_tools),
                ctx.is_streaming,
            )
        return self._options if ctx.options is None else self._options.merge(ctx.options)

    async def _prepare(
        self, ctx: AgentRunContext, log: _RunLog
    ) -> tuple[AgentThread, list[Message], ChatOptions, Sequence[FunctionTool]]:
        thread, fresh, instructions, call_tools = self._begin(ctx, log)
        if fresh or thread.state == "new":  # nothing to add: the thread only has to exist
            await thread.on_new_message(fresh)
        ctx.thread = thread  # a retry (``call_next`` again) continues on the same thread
        history = await thread.get_messages()
        if self._reduce_before_loop and self.history_reducer is not None:
            history = await self.history_reducer.reduce(history)
        options = self._request(ctx, thread, history, instructions, call_tools)
        return thread, history, options, call_tools

    async def run(
        self,
        messages: AgentInput = None,
        **kw: Unpack[RunKeywords],
    ) -> AgentResponse:
        """Run to the final answer (see `Agent.run`)."""
        ctx = self._context(messages, kw, streaming=False)
        on_intermediate = kw.get("on_intermediate")
        log = _RunLog()
        if not self._agent_middleware:
            return await self._run_core(ctx, on_intermediate, log)

        completed = False  # did a run of the agent itself reach its end?

        async def final(inner: AgentRunContext) -> None:
            nonlocal completed
            inner.response = await self._run_core(inner, on_intermediate, log)
            completed = True

        response = await run_chain(self._agent_middleware, ctx, final)
        return response if completed else await self._record_answer(ctx, response, log)

    async def _record_answer(
        self, ctx: AgentRunContext, response: AgentResponse, log: _RunLog
    ) -> AgentResponse:
        """A middleware answered without a completed run of the agent (it skipped
        ``call_next``, or caught its failure and answered instead): the thread still gets
        the input and that answer, and the response carries the thread, so the caller
        continues the conversation as after any other run (instead of on a thread that
        lacks this turn, or on none at all). What a failed attempt recorded is not repeated.
        """
        thread = self._thread_for_run(ctx.thread)  # never a thread the answer came with
        await log.record_input(thread, self._incoming(ctx.messages))
        response.messages = await Recorder(thread, self, None, log.seen).drain(response.messages)
        response.thread = thread
        if response.agent_id is None:
            response.agent_id = self.id
        return response

    async def _run_core(
        self,
        ctx: AgentRunContext,
        on_intermediate: IntermediateCallback | None,
        log: _RunLog,
    ) -> AgentResponse:
        # `_prepare` and `_finish` inline: two coroutines fewer on every turn
        try:
            thread, fresh, instructions, call_tools = self._begin(ctx, log)
            if fresh or thread.state == "new":  # nothing to add: the thread only has to exist
                await thread.on_new_message(fresh)
            ctx.thread = thread  # a retry (``call_next`` again) continues on the same thread
            history = messages_now(thread)
            if history is None:
                history = await thread.get_messages()
            if self._reduce_before_loop and self.history_reducer is not None:
                history = await self.history_reducer.reduce(history)
            opts = self._request(ctx, thread, history, instructions, call_tools)
            recorder = Recorder(thread, self, on_intermediate, log.seen)
            response = await self._loop.get_response(
                history,
                options=opts,
                cancellation_token=ctx.cancellation_token,
                tools=call_tools,
                on_message=recorder.on_message,
                tool_kwargs=ctx.kwargs,
                retry_policy=self.retry_policy,
            )
            return self._response(await recorder.drain(response.messages), thread, response)
        except BaseException as exc:
            _log_failure(self.name, exc)
            raise

    def _response(
        self, produced: list[Message], thread: AgentThread, response: ChatResponse
    ) -> AgentResponse:
        """The run's response, from the messages it recorded and the loop's answer."""
        if _log.isEnabledFor(logging.DEBUG):
            _log.debug(
                "agent %s: run done, finish reason %s, %d message(s), usage %s",
                self.name,
                response.finish_reason,
                len(produced),
                response.usage,
            )
        return AgentResponse(
            produced,
            thread=thread,
            usage=response.usage,
            value=response.value,
            agent_id=self.id,
            finish_reason=response.finish_reason,
            response_id=response.response_id,
        )

    def run_stream(
        self,
        messages: AgentInput = None,
        **kw: Unpack[RunKeywords],
    ) -> AgentResponseStream:
        """Run and stream the answer (see `Agent.run_stream`)."""
        ctx = self._context(messages, kw, streaming=True)
        on_intermediate = kw.get("on_intermediate")
        log = _RunLog()
        if not self._agent_middleware:
            return self._stream_core(ctx, on_intermediate, log)
        result: list[AgentResponse] = []
        opened: list[AgentResponseStream] = []

        def open_core(inner: AgentRunContext) -> AgentResponseStream:
            stream = self._stream_core(inner, on_intermediate, log)
            opened.append(stream)
            return stream

        async def updates() -> AsyncIterator[AgentResponseUpdate]:
            async for update in stream_chain(self._agent_middleware, ctx, open_core):
                yield update
            response = ctx.response
            if response is not None:
                if not any(stream.has_response for stream in opened):
                    response = await self._record_answer(ctx, response, log)
                result.append(response)

        return AgentResponseStream(updates(), lambda: result[-1])

    def _stream_core(
        self,
        ctx: AgentRunContext,
        on_intermediate: IntermediateCallback | None,
        log: _RunLog,
    ) -> AgentResponseStream:
        result: list[AgentResponse] = []

        async def updates() -> AsyncIterator[AgentResponseUpdate]:
            try:
                async with contextlib.aclosing(streamed()) as inner:  # closed now if we stop
                    async for update in inner:
                        yield update
            except BaseException as exc:
                _log_failure(self.name, exc)
                raise

        async def streamed() -> AsyncGenerator[AgentResponseUpdate, None]:
            used, request, opts, call_tools = await self._prepare(ctx, log)
            recorder = Recorder(used, self, on_intermediate, log.seen)
            chunks: list[ChatResponseUpdate] = []
            stream = self._loop.get_streaming_response(
                request,
                options=opts,
                cancellation_token=ctx.cancellation_token,
                tools=call_tools,
                on_message=recorder.on_message,
                tool_kwargs=ctx.kwargs,
                retry_policy=self.retry_policy,
            )
            try:
                async for update in stream:
                    chunks.append(update)
                    if not update.contents:
                        continue
                    yield AgentResponseUpdate(
                        update.contents,
                        role=update.role,
                        author_name=update.author_name or self.name,
                        message_id=update.message_id,
                        agent_id=self.id,
                        response_id=update.response_id,
                    )
            finally:
                close = getattr(stream, "aclose", None)
                if close is not None:  # stop the loop now when the caller stops early
                    await close()
            response = ChatResponse.from_updates(chunks, response_format=opts.response_format)
            result.append(self._response(await recorder.drain(response.messages), used, response))

        return AgentResponseStream(updates(), lambda: result[-1])


def _log_failure(agent_name: str, exc: BaseException) -> None:
    if isinstance(exc, GeneratorExit):
        return  # the caller stopped reading a stream: not a failure
    _log.debug("agent %s: run ended by %s: %s", agent_name, type(exc).__name__, exc)


class _RunLog:
    """What one run recorded, by message id, and on which thread.

    An agent middleware may call ``call_next`` more than once (to retry) or answer after a
    failed attempt; what an earlier attempt recorded is not recorded again. Only on the same
    thread: a middleware that moves the run to another thread starts a new log.
    """

    __slots__ = ("seen", "thread")

    def __init__(self) -> None:
        self.seen: dict[str, Message] = {}
        self.thread: AgentThread | None = None

    def fresh(self, thread: AgentThread, incoming: list[Message]) -> list[Message]:
        """Log the run on `thread` from now on; returns the messages of `incoming` it has not
        recorded yet, marked as recorded."""
        if thread is not self.thread:
            self.thread = thread
            self.seen.clear()
        if not incoming:
            return []
        fresh = [m for m in incoming if m.message_id not in self.seen]
        for m in fresh:
            self.seen[m.message_id] = m
        return fresh

    async def record_input(self, thread: AgentThread, incoming: list[Message]) -> None:
        fresh = self.fresh(thread, incoming)
        if fresh or thread.state == "new":  # nothing to add: the thread only has to exist
            await thread.on_new_message(fresh)


def _as_tools(items: Iterable[Any], *, owner: str) -> list[FunctionTool]:
    out: list[FunctionTool] = []
    for item in items:
        if isinstance(item, FunctionTool):
            out.append(item)
        elif isinstance(item, Agent):
            out.append(item.as_tool())
        elif isinstance(item, type) and any(
            isinstance(v, ToolMethod) for k in item.__mro__ for v in vars(k).values()
        ):
            raise ConfigurationError(
                f"agent `{owner}`: {item.__name__} is a plugin class; pass an instance "
                f"({item.__name__}(...)), whose @tool methods are then bound to it"
            )
        elif found := plugin_tools(item):
            out.extend(found)
        elif callable(item):
            out.append(tool(item))
        else:
            raise ConfigurationError(
                f"agent `{owner}`: {item!r} is not a tool; pass a FunctionTool, a typed "
                "function, another agent, or an object with @tool-marked methods"
            )
    return out


class _ReduceEachCall(ChatMiddleware):
    """Applies a history reducer to the messages of every model call of the loop."""

    def __init__(self, reducer: HistoryReducer) -> None:
        self._reducer = reducer

    async def process(self, context: ChatContext, call_next: ChatNext) -> None:
        context.messages = await self._reducer.reduce(context.messages)
        await call_next()
