"""`ChatAgent`: the local agent, a chat client plus tools, on a `LocalThread`.

The agent holds what stays the same from run to run (client, tools, options, middleware);
`run` and `run_stream` wrap its agent middleware around one turn, which `turn` runs forward
(input recorded, history read, instructions in front, the tool loop, the rest recorded)
with a `Recorder` as the only writer of the thread: every message once, in order, named
with the agent's name, a message with tool calls together with their results (so a run
that fails in between leaves no call without its result).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from typing import Any, Unpack

from ..core import ConfigurationError, Message, UsageError
from ..core.retry import RetryPolicy
from ..models import ChatClient, ChatOptions, resolve_model
from ..tools import (
    ChatContext,
    ChatMiddleware,
    ChatNext,
    FunctionInvokingChatClient,
    FunctionMiddleware,
    FunctionTool,
)
from ..tools.invoking import RECORDED
from ._run_guard import AgentGuard, StreamTurn, Turn
from .agent import Agent, AgentInput
from .agent_middleware import AgentMiddleware, AgentRunContext, run_chain, stream_chain
from .closing import CLOSE_TIMEOUT, close_client
from .context_providers import ContextProvider, Pipeline, check_providers
from .guardrails import Guardrail, check_guardrails
from .instructions import InstructionTemplate
from .message_store import MessageStoreFactory
from .recorder import Recorder
from .reducers import HistoryReducer
from .response import AgentResponse, AgentResponseStream, AgentResponseUpdate
from .run_options import RunKeywords, chat_keywords
from .thread import LocalThread
from .tool_like import ToolLike, as_tools
from .tool_results_answer import DEFAULT_TOOL_RESULTS_FORMAT, AnswerWithToolResults, check_format
from .turn import run_turn, stream_turn
from .usage import UsageLimits

__all__ = ["ChatAgent", "ToolLike"]


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
    `context_providers` add instructions, messages and tools before each run and see its
    outcome after it (memory, knowledge; see `ContextProvider`), inside the middleware.

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

    ``guardrails`` check the input, the final answer and each tool call's arguments and
    result (see `cantata.agents.guardrails`); a tripwire ends the run with
    `GuardrailTripwire`. ``usage_limits`` (one `UsageLimits` or several, per run or per
    thread) stop a run before the model call that would pass one, with
    `UsageLimitExceeded`; the run's usage per model is then in `AgentResponse.run_usage`.

    `client` may be a model name (``ChatAgent("anthropic:claude-sonnet-4-5")``, see
    `cantata.models.resolve_model`); the agent then owns the client it made.

    Ownership: the client belongs to the caller (one client often serves many agents), so
    closing the agent leaves it open; with ``owns_client=True`` the agent closes it in
    `aclose` (``async with ChatAgent(LocalChatClient(), owns_client=True) as agent:``),
    and a closed agent refuses to run.
    """

    thread_type = LocalThread

    def __init__(
        self,
        client: ChatClient | str,
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
        context_providers: Iterable[ContextProvider] = (),
        owns_providers: bool = False,
        guardrails: Iterable[Guardrail] = (),
        usage_limits: UsageLimits | Iterable[UsageLimits] | None = None,
    ) -> None:
        super().__init__(
            name=name,
            description=description,
            instructions=instructions,
            arguments=arguments,
            id=id,
        )
        if isinstance(client, str):  # a model name: the agent made the client, so owns it
            client = resolve_model(client)
            owns_client = True
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
        self._tools: tuple[FunctionTool, ...] = tuple(as_tools(tools, owner=name))
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
        self._providers = check_providers(context_providers, owner=name)
        self.owns_providers = owns_providers
        """Whether `aclose` closes the context providers too."""
        self._guardrails = check_guardrails(guardrails, owner=name)
        self._usage_limits = _limits(usage_limits, owner=name)
        self._guard = (
            AgentGuard(name, self._guardrails, self._usage_limits)
            if self._guardrails or self._usage_limits
            else None
        )

    @property
    def guardrails(self) -> tuple[Guardrail, ...]:
        """The agent's guardrails, in the order they run at each stage."""
        return self._guardrails

    @property
    def usage_limits(self) -> tuple[UsageLimits, ...]:
        """The limits each run (or each thread) of the agent stops at."""
        return self._usage_limits

    @property
    def context_providers(self) -> tuple[ContextProvider, ...]:
        """What tells the agent more before each run, in order (see `ContextProvider`)."""
        return self._providers

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
        try:
            if self.owns_providers:
                for provider in self._providers:
                    await asyncio.wait_for(provider.aclose(), CLOSE_TIMEOUT)
        finally:
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

    async def run(
        self,
        messages: AgentInput = None,
        **kw: Unpack[RunKeywords],
    ) -> AgentResponse:
        """Run to the final answer (see `Agent.run`)."""
        ctx = self._context(messages, kw, streaming=False)
        recorder = Recorder(self, kw.get("on_intermediate"))
        turn: Turn = _run_provided if self._providers else run_turn
        if self._guard is not None:
            turn = self._guard.run(turn)
        if not self._agent_middleware:
            return await turn(self, ctx, recorder)

        completed = False  # did a run of the agent itself reach its end?

        async def final(inner: AgentRunContext) -> None:
            nonlocal completed
            inner.response = await turn(self, inner, recorder)
            completed = True

        response = await run_chain(self._agent_middleware, ctx, final)
        return response if completed else await self._record_answer(ctx, response, recorder)

    async def _record_answer(
        self, ctx: AgentRunContext, response: AgentResponse, recorder: Recorder
    ) -> AgentResponse:
        """A middleware answered without a completed run of the agent (it skipped
        ``call_next``, or caught its failure and answered instead): the thread still gets
        the input and that answer, and the response carries the thread, so the caller
        continues the conversation as after any other run (instead of on a thread that
        lacks this turn, or on none at all). What a failed attempt recorded is not repeated.
        """
        thread = self._thread_for_run(ctx.thread)  # never a thread the answer came with
        pending = recorder.record_input(thread, self._incoming(ctx.messages))
        if pending is not RECORDED:
            await pending
        response.messages = await recorder.drain(response.messages, intermediate=False)
        response.thread = thread
        if response.agent_id is None:
            response.agent_id = self.id
        return response

    def run_stream(
        self,
        messages: AgentInput = None,
        **kw: Unpack[RunKeywords],
    ) -> AgentResponseStream:
        """Run and stream the answer (see `Agent.run_stream`)."""
        ctx = self._context(messages, kw, streaming=True)
        recorder = Recorder(self, kw.get("on_intermediate"))
        turn: StreamTurn = _stream_provided if self._providers else stream_turn
        if self._guard is not None:
            turn = self._guard.stream(turn)
        if not self._agent_middleware:
            return turn(self, ctx, recorder)
        result: list[AgentResponse] = []
        opened: list[AgentResponseStream] = []

        def open_core(inner: AgentRunContext) -> AgentResponseStream:
            stream = turn(self, inner, recorder)
            opened.append(stream)
            return stream

        async def updates() -> AsyncIterator[AgentResponseUpdate]:
            async for update in stream_chain(self._agent_middleware, ctx, open_core):
                yield update
            response = ctx.response
            if response is not None:
                if not any(stream.has_response for stream in opened):
                    response = await self._record_answer(ctx, response, recorder)
                result.append(response)

        return AgentResponseStream(updates(), lambda: result[-1])


async def _provide(agent: ChatAgent, ctx: AgentRunContext) -> Pipeline:
    """Run the providers before the turn and put what they added into `ctx`."""
    thread = agent._thread_for_run(ctx.thread)
    ctx.thread = thread  # the turn runs on this thread, the providers' state is in it
    await thread.load_context_state()
    arguments = {**(agent.arguments or {}), **(ctx.arguments or {})}
    pipeline = Pipeline(
        agent._providers,
        agent,
        thread,
        agent._incoming(ctx.messages),
        arguments=arguments,
        tool_kwargs=ctx.kwargs,
    )
    await pipeline.before()
    kept = pipeline.kept
    if kept:
        await thread.on_new_message(kept)
    ctx.context_messages = [*pipeline.instructions, *pipeline.messages, *ctx.context_messages]
    tools = pipeline.tools(lambda offered, source: as_tools(offered, owner=source))
    if tools:
        ctx.tools = [*(ctx.tools or ()), *tools]
    return pipeline


async def _finish(
    pipeline: Pipeline, response: AgentResponse | None, error: BaseException | None
) -> None:
    """Show the providers the outcome and keep their state; the response lists what
    each one added."""
    await pipeline.after(response, error)
    if response is not None:
        response.context = pipeline.additions
    await pipeline.thread.save_context_state()


async def _run_provided(
    agent: ChatAgent, ctx: AgentRunContext, recorder: Recorder
) -> AgentResponse:
    pipeline = await _provide(agent, ctx)
    try:
        response = await run_turn(agent, ctx, recorder)
    except Exception as exc:
        await _finish(pipeline, None, exc)
        raise
    await _finish(pipeline, response, None)
    return response


def _stream_provided(
    agent: ChatAgent, ctx: AgentRunContext, recorder: Recorder
) -> AgentResponseStream:
    result: list[AgentResponse] = []

    async def updates() -> AsyncIterator[AgentResponseUpdate]:
        pipeline = await _provide(agent, ctx)
        stream = stream_turn(agent, ctx, recorder)
        try:
            async for update in stream:
                yield update
        except BaseException as exc:
            await stream.aclose()  # a caller that stopped reading stops the turn too
            if isinstance(exc, Exception):
                await _finish(pipeline, None, exc)
            raise
        response = stream.response
        await _finish(pipeline, response, None)
        result.append(response)

    return AgentResponseStream(updates(), lambda: result[-1])


def _limits(
    limits: UsageLimits | Iterable[UsageLimits] | None, *, owner: str
) -> tuple[UsageLimits, ...]:
    if limits is None:
        return ()
    found = (limits,) if isinstance(limits, UsageLimits) else tuple(limits)
    for item in found:
        if not isinstance(item, UsageLimits):
            raise ConfigurationError(
                f"agent `{owner}`: usage_limits must be UsageLimits (or several), got "
                f"{type(item).__name__}"
            )
    return found


class _ReduceEachCall(ChatMiddleware):
    """Applies a history reducer to the messages of every model call of the loop."""

    def __init__(self, reducer: HistoryReducer) -> None:
        self._reducer = reducer

    async def process(self, context: ChatContext, call_next: ChatNext) -> None:
        context.messages = await self._reducer.reduce(context.messages)
        await call_next()
