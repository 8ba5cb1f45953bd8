"""`Agent`: a stateless role (name, description, instructions) that runs on a thread.

The definition never changes while it runs: everything that belongs to one conversation
lives in the thread the caller passes in (or that the agent creates and returns on the
response), and everything that belongs to one call (arguments, options, tools) lives in
that call. So one agent can serve many threads at once.
"""

from __future__ import annotations

import functools
import inspect
import re
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from contextvars import ContextVar
from types import TracebackType
from typing import TYPE_CHECKING, Any, ClassVar, Self, TypeAlias, Unpack

from ..core import (
    ConfigurationError,
    Message,
    ThreadError,
    UsageError,
    new_id,
    tracing,
)
from ..core._serving import mcp_server
from ..models import ChatOptions
from .as_tool import agent_as_tool
from .instructions import (
    MAX_RENDER_CHARS,
    MAX_RENDER_SECONDS,
    InstructionTemplate,
    merge_arguments,
)
from .response import AgentResponse, AgentResponseStream, AgentResponseUpdate
from .run_options import IntermediateCallback, RunKeywords, call_options
from .thread import AgentThread, LocalThread

if TYPE_CHECKING:
    from ..tools import FunctionTool

__all__ = ["Agent", "AgentInput", "IntermediateCallback"]

AgentInput: TypeAlias = str | Message | Iterable[str | Message] | None
"""What `run` accepts: nothing, a string (a user message), a `Message`, or a list of them."""

_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
AGENT_ID_KEY = "agent_id"
"""The metadata key under which every message records the id of the agent it went through."""


# -- tracing: an ``invoke_agent`` span around every run ------------------------------

_TRACED = "_cantata_traced"
# The agent whose run span is open in this context, and that span: a nested call of the
# same agent's run under its own span (``super().run``, `run_stream` calling `run`) is
# part of that run, not another one.
_running: ContextVar[tuple[Agent, Any] | None] = ContextVar("cantata_agent_run", default=None)

_RunFn = Callable[..., Awaitable["AgentResponse"]]
_StreamFn = Callable[..., "AgentResponseStream"]


def _in_own_span(agent: Agent) -> bool:
    held = _running.get()
    return held is not None and held[0] is agent and held[1] is tracing.current_span()


def _start_run_span(agent: Agent, thread: Any) -> Any:
    attributes = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": agent.name,
        "gen_ai.agent.id": agent.id,
        "gen_ai.agent.description": agent.description or None,
        "gen_ai.conversation.id": _thread_id(thread),
    }
    return tracing.start_span(f"invoke_agent {agent.name}", attributes)


def _thread_id(thread: Any) -> str | None:
    try:
        found = getattr(thread, "id", None)
    except ThreadError:  # a deleted thread: the run will say so
        return None
    return found if isinstance(found, str) else None


def _record_response(span: Any, response: AgentResponse) -> None:
    thread_id = _thread_id(response.thread)
    if thread_id is not None:
        span.set_attribute("gen_ai.conversation.id", thread_id)
    usage = response.usage
    if usage is not None:
        span.set_attribute("gen_ai.usage.input_tokens", usage.input_tokens or 0)
        span.set_attribute("gen_ai.usage.output_tokens", usage.output_tokens or 0)
    if response.finish_reason:
        span.set_attribute("gen_ai.response.finish_reasons", [str(response.finish_reason)])
    if response.response_id:
        span.set_attribute("gen_ai.response.id", response.response_id)


def _traced_run(run: _RunFn) -> _RunFn:
    """`run` inside an ``invoke_agent`` span while tracing is on (one check while off)."""

    @functools.wraps(run)
    def traced(self: Agent, *args: Any, **kwargs: Any) -> Awaitable[AgentResponse]:
        # A plain function returning the run's own coroutine: while tracing is off a turn
        # pays one call, not a coroutine more (hot in team turns).
        if not tracing.enabled() or _in_own_span(self):
            return run(self, *args, **kwargs)
        return in_span(self, *args, **kwargs)

    async def in_span(self: Agent, *args: Any, **kwargs: Any) -> AgentResponse:
        span = _start_run_span(self, kwargs.get("thread"))
        token = tracing.activate(span)
        held = _running.set((self, span))
        try:
            response = await run(self, *args, **kwargs)
        except BaseException as exc:
            tracing.end_span(span, exc)
            raise
        finally:
            _running.reset(held)
            tracing.deactivate(token)
        _record_response(span, response)
        span.end()
        return response

    setattr(traced, _TRACED, True)
    return traced


def _traced_stream(run_stream: _StreamFn) -> _StreamFn:
    """`run_stream` whose iteration runs inside an ``invoke_agent`` span while tracing is
    on: opened at the first update, ended when the stream ends, fails or is closed."""

    @functools.wraps(run_stream)
    def traced(self: Agent, *args: Any, **kwargs: Any) -> AgentResponseStream:
        stream = run_stream(self, *args, **kwargs)
        # anything but an AgentResponseStream is handed back as it is, untraced
        if tracing.enabled() and isinstance(stream, AgentResponseStream) and not _in_own_span(self):
            _TracedRun(self, stream, kwargs.get("thread"))
        return stream

    setattr(traced, _TRACED, True)
    return traced


class _TracedRun:
    """Stands between a stream and its source: each step of the run happens with the run's
    span current (the span is never current between steps, so it cannot leak into the
    caller), and the span ends exactly once: at the response, a failure, `aclose`, or
    when the stream is dropped unfinished."""

    __slots__ = ("_agent", "_finalize", "_source", "_span", "_thread")

    def __init__(self, agent: Agent, stream: AgentResponseStream, thread: Any) -> None:
        self._agent = agent
        self._thread = thread
        self._span: Any = None
        # the stream's own slots: this object takes the place of its source and finalizer
        self._source = stream._source
        self._finalize = stream._finalize
        stream._source = self
        stream._finalize = self._finish

    def __aiter__(self) -> _TracedRun:
        return self

    async def __anext__(self) -> AgentResponseUpdate:
        span = self._span
        if span is None:
            span = self._span = _start_run_span(self._agent, self._thread)
            if span is None:  # tracing was turned off since the stream was made
                span = self._span = False
        if span is False:
            return await self._source.__anext__()
        token = tracing.activate(span)
        held = _running.set((self._agent, span))
        try:
            return await self._source.__anext__()
        except StopAsyncIteration:
            raise  # the stream calls `_finish` now, which ends the span
        except BaseException as exc:
            self._end(exc)
            raise
        finally:
            _running.reset(held)
            tracing.deactivate(token)

    def _finish(self) -> AgentResponse:
        try:
            response = self._finalize()
        except BaseException as exc:
            self._end(exc)
            raise
        if self._span:
            _record_response(self._span, response)
        self._end(None)
        return response

    async def aclose(self) -> None:
        """Stop the run (its cleanup still inside the span), then end the span."""
        span = self._span
        close = getattr(self._source, "aclose", None)
        try:
            if close is not None:
                if span:
                    token = tracing.activate(span)
                    try:
                        await close()
                    finally:
                        tracing.deactivate(token)
                else:
                    await close()
        finally:
            self._end(None)

    def _end(self, error: BaseException | None) -> None:
        span, self._span = self._span, False
        if span:
            tracing.end_span(span, error)

    def __del__(self) -> None:
        if getattr(self, "_span", None):  # dropped unfinished and unclosed: the span ends
            self._end(None)


class Agent(ABC):
    """Abstract agent: a named role that answers on a thread.

    `name` is letters, digits, ``_`` and ``-`` (it becomes a tool name in `as_tool`).
    Subclasses implement `run` (and `run_stream` when they can stream), and say which
    thread kind they take in `thread_type`. Two helpers keep subclasses consistent:
    `_thread_for_run(thread)` checks the thread's kind (or creates one), and
    `_incoming(messages)` normalizes the input and tags it with the agent's id.

    Every subclass's `run` and `run_stream` are traced without writing anything: while
    tracing is on (`cantata.core.tracing`), each run is an ``invoke_agent {name}`` span,
    parent of the run's model and tool spans (a subclass calling ``super().run`` or its
    own `run` from `run_stream` makes one span, not two).
    """

    thread_type: ClassVar[type[AgentThread]] = LocalThread

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        own = vars(cls)
        for name, wrap in (("run", _traced_run), ("run_stream", _traced_stream)):
            fn = own.get(name)
            if (
                inspect.isfunction(fn)
                and not getattr(fn, "__isabstractmethod__", False)
                and not getattr(fn, _TRACED, False)
            ):
                setattr(cls, name, wrap(fn))

    def __init__(
        self,
        *,
        name: str = "agent",
        description: str = "",
        instructions: str | InstructionTemplate | None = None,
        arguments: Mapping[str, Any] | None = None,
        id: str | None = None,
    ) -> None:
        if not isinstance(name, str) or not _NAME.fullmatch(name):  # match() allows a final \n
            raise ConfigurationError(
                f"agent name {name!r} is not valid: use 1 to 64 letters, digits, '_' or '-' "
                "(the name becomes a tool name when the agent is used as a tool)"
            )
        self._name = name
        self._description = description
        self._id = id or f"{name}-{new_id()[:12]}"
        # a ready template keeps its own limits (max_chars, max_seconds)
        if isinstance(instructions, InstructionTemplate):
            self._template: InstructionTemplate | None = instructions
            self._instructions: str | None = instructions.source
        else:
            self._instructions = instructions
            self._template = (
                InstructionTemplate(instructions, owner=name) if instructions is not None else None
            )
        self._arguments: dict[str, Any] = dict(arguments or {})

    @property
    def name(self) -> str:
        """The agent's name: its tool name, and the author name of what it writes."""
        return self._name

    @property
    def description(self) -> str:
        """What the agent is for (its tool description in `as_tool`)."""
        return self._description

    @property
    def id(self) -> str:
        """A unique id, recorded in the metadata of every message the agent handles."""
        return self._id

    @property
    def instructions(self) -> str | None:
        """The instruction template's source (rendered anew on every call)."""
        return self._instructions

    @property
    def arguments(self) -> Mapping[str, Any]:
        """Default template arguments; a call's `arguments=` override them for that call."""
        return dict(self._arguments)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self._name!r}, id={self._id!r})"

    # -- running ---------------------------------------------------------------------

    @abstractmethod
    async def run(
        self,
        messages: AgentInput = None,
        **kw: Unpack[RunKeywords],
    ) -> AgentResponse:
        """Run to the final answer; `on_intermediate` sees tool calls and results as they
        happen. The keywords, the same for every agent kind, are `RunKeywords`'s.

        Chat options may be given as keywords (``temperature=0, response_format=Colour``,
        see `ChatOptionKeywords`); they override ``options=`` for this call, and any other
        keyword is refused with `UnknownOptionError`."""

    @_traced_stream
    def run_stream(
        self,
        messages: AgentInput = None,
        **kw: Unpack[RunKeywords],
    ) -> AgentResponseStream:
        """Run and stream `AgentResponseUpdate`s; `stream.response` holds the whole answer
        once the stream ends.

        This default runs `run` and yields each new message whole, so an agent that cannot
        stream only implements `run`; agents that can stream override it.
        """
        result: list[AgentResponse] = []

        async def updates() -> AsyncIterator[AgentResponseUpdate]:
            response = await self.run(messages, **kw)
            result.append(response)
            for message in response.messages:
                yield AgentResponseUpdate(
                    list(message.contents),
                    role=message.role,
                    author_name=message.author_name,
                    message_id=message.message_id,
                    agent_id=self._id,
                    response_id=response.response_id,
                )

        return AgentResponseStream(updates(), lambda: result[-1])

    # -- lifecycle -------------------------------------------------------------------

    async def aclose(self) -> None:
        """Close what this agent opened (see the subclass for what it owns); idempotent.

        An agent opens nothing by default: clients, stores and threads passed in belong
        to the caller, who may share them between agents."""
        return None

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    # -- threads ---------------------------------------------------------------------

    def create_thread(self) -> AgentThread:
        """A new, empty thread of the kind this agent uses."""
        return LocalThread()

    async def deserialize_thread(self, data: Any) -> AgentThread:
        """Restore a thread from what `thread.serialize()` wrote (a dict or JSON text)."""
        if issubclass(self.thread_type, LocalThread):
            return await LocalThread.deserialize(data)
        raise ThreadError(
            f"agent `{self._name}` of kind `{type(self).__name__}` does not know how to "
            f"restore threads of kind `{self.thread_type.__name__}`; override deserialize_thread"
        )

    def _thread_for_run(self, thread: AgentThread | None) -> AgentThread:
        if thread is None:
            return self.create_thread()
        if not isinstance(thread, self.thread_type):
            raise ThreadError(
                f"thread of kind `{type(thread).__name__}` cannot be used with agent "
                f"`{self._name}` of kind `{type(self).__name__}`; create one with "
                "`agent.create_thread()`"
            )
        if thread.is_deleted:
            raise ThreadError(
                f"thread of kind `{type(thread).__name__}` given to agent `{self._name}` was "
                "deleted; create a new one with `agent.create_thread()`"
            )
        return thread

    def _incoming(self, messages: AgentInput) -> list[Message]:
        """Normalize run input and tag each message with this agent's id (on a copy, so
        the caller's objects are not changed)."""
        out = []
        agent_id = self._id
        for m in Message.coerce(messages):
            metadata = dict(m.metadata)
            metadata[AGENT_ID_KEY] = agent_id
            out.append(
                Message(
                    m.role,
                    list(m.contents),
                    author_name=m.author_name,
                    message_id=m.message_id,
                    metadata=metadata,
                )
            )
        return out

    def _render_instructions(
        self, arguments: Mapping[str, Any] | None, override: str | None = None
    ) -> str | None:
        """The instructions for one call: the agent's template, or the call's override
        (compiled for this call only), rendered with the merged arguments."""
        if override is not None:
            if not isinstance(override, str):
                raise UsageError(
                    f"agent `{self._name}`: instructions_override must be a string, got "
                    f"{type(override).__name__}"
                )
            limits = self._template  # an override keeps the limits of the agent's template
            template: InstructionTemplate | None = InstructionTemplate(
                override,
                owner=self._name,
                max_chars=limits.max_chars if limits else MAX_RENDER_CHARS,
                max_seconds=limits.max_seconds if limits else MAX_RENDER_SECONDS,
            )
        else:
            template = self._template
        if template is None:
            return None
        if template.is_static:
            return template.source
        return template.render(merge_arguments(self._arguments, arguments))

    def _call_options(
        self, options: ChatOptions | None, chat_options: Mapping[str, Any]
    ) -> ChatOptions | None:
        """The call's options with its keyword chat options over them (see `run`)."""
        return call_options(self._name, options, chat_options) if chat_options else options

    # -- composition -----------------------------------------------------------------

    def as_tool(
        self,
        *,
        name: str | None = None,
        description: str | None = None,
        arg_name: str = "task",
        arg_description: str | None = None,
        stream_callback: Callable[[Any], Any] | None = None,
        allow_instructions_override: bool = False,
    ) -> FunctionTool:
        """This agent as a tool of another agent: each call runs it on a fresh thread with
        the tool's one text argument and returns its answer's text. With
        `allow_instructions_override` the tool also takes an optional
        ``instructions_override`` argument (see `agent_as_tool`)."""
        return agent_as_tool(
            self,
            name=name,
            description=description,
            arg_name=arg_name,
            arg_description=arg_description,
            stream_callback=stream_callback,
            allow_instructions_override=allow_instructions_override,
        )

    def as_mcp_server(self, *, name: str = "cantata", call_timeout: float | None = 300.0) -> Any:
        """This agent as an MCP server, one tool per served run: the same server as
        ``cantata.serve.as_mcp_server(agent)``, which this calls. The serving layer sits
        above this one, so the `cantata` package registers it (`cantata.core._serving`)."""
        return mcp_server(self, kind="agent", name=name, call_timeout=call_timeout)


async def notify(callback: IntermediateCallback | None, message: Message) -> None:
    """Hand a message to an `on_intermediate` callback, awaiting it when it is async."""
    if callback is None:
        return
    result = callback(message)
    if inspect.isawaitable(result):
        await result
