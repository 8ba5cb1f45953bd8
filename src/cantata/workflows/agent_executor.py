"""`AgentExecutor`: an agent as a node of a workflow.

Per run, the executor keeps (in the run, so runs stay isolated and checkpoints hold them):

- its cache: messages received since the agent last ran (executor state, small);
- its conversation: every message it received and produced, in order (an append-only log,
  sent downstream as `AgentExecutorResponse.full_conversation`);
- its thread: what the agent's model sees (an append-only log, shared by every executor
  given the same ``thread=``), rebuilt into a fresh local thread for each agent run; an
  agent whose thread lives on a server (a `ServiceThread`) instead keeps that one thread
  for the whole run (serialized in the executor state) and is sent only what it has not
  seen;
- its pending requests for input, when function calls and approvals become workflow requests.

Logs are saved incrementally, so a checkpoint costs the same however long the talk gets.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from ..agents import Agent, AgentResponse, AgentThread, ServiceThread
from ..core import (
    ConfigurationError,
    FunctionApprovalRequestContent,
    FunctionApprovalResponseContent,
    FunctionCallContent,
    FunctionResultContent,
    Message,
    register,
)
from ._agent_messages import (
    CONVERSATION,
    AgentExecutorRequest,
    AgentExecutorResponse,
    TurnToken,
    as_user_messages,
    open_requests,
)
from .context import WorkflowContext
from .events import AgentResponseEvent, AgentUpdateEvent
from .executor import Executor, handler, response_handler

__all__ = [
    "AgentExecutor",
    "AgentExecutorRequest",
    "AgentExecutorResponse",
    "AgentExecutorState",
    "ContextMode",
    "TurnToken",
]

ContextMode: TypeAlias = Literal["full", "last_agent", "custom"]
ContextFilter = Callable[[AgentExecutorResponse], Sequence[Message]]
AgentRequest: TypeAlias = FunctionApprovalRequestContent | FunctionCallContent
AgentAnswer: TypeAlias = FunctionApprovalResponseContent | FunctionResultContent


@register(name="cantata.workflows.AgentExecutorState")
@dataclass(slots=True)
class AgentExecutorState:
    """What an agent executor keeps between supersteps of one run (besides its logs)."""

    cache: list[Message] = field(default_factory=list)
    waiting: list[str] = field(default_factory=list)
    """Request ids the agent waits on before it runs again."""
    seeded: bool = False
    """Unused: a seeded thread is now read when the run starts. Kept so saved states load."""
    service_thread: dict[str, Any] | None = None
    """The agent's server-side thread (`serialize()` data), kept so each run continues it."""
    service_seen: int = 0
    """How many entries of the shared thread log that server thread has already seen."""

    def __post_init__(self) -> None:
        # Read back from checkpoints: damaged data must fail here (as a CheckpointError),
        # not later in the agent as an AttributeError.
        if (
            not isinstance(self.cache, list)
            or not all(isinstance(m, Message) for m in self.cache)
            or not isinstance(self.waiting, list)
            or not all(isinstance(r, str) for r in self.waiting)
            or not isinstance(self.seeded, bool)
            or not (self.service_thread is None or isinstance(self.service_thread, dict))
            or not isinstance(self.service_seen, int)
        ):
            raise TypeError(
                "an AgentExecutorState needs cache: list[Message], waiting: list[str], "
                "seeded: bool, service_thread: dict | None and service_seen: int"
            )


class AgentExecutor(Executor):
    """Runs an agent on what it receives and sends an `AgentExecutorResponse` downstream.

    Inputs: a string, a `Message`, a list of them, an `AgentExecutorRequest` (with
    ``should_respond=False`` the messages are only cached) or the `AgentExecutorResponse`
    of an upstream agent executor (or the list of them a fan-in delivers), taken per
    `context_mode`: ``"full"`` (its whole conversation), ``"last_agent"`` (its agent's reply
    only) or ``"custom"`` (`context_filter(response)`). With ``turn_token=True`` it only
    caches, and runs when a `TurnToken` arrives, then passes the token on.

    Options: `thread` shares a conversation between executors of a run (an `AgentThread`,
    whose messages seed it, or a name); `other_agents_as_user` gives other agents' replies
    to the model as user messages; `forward_incoming` puts what it received before its
    reply in `full_conversation`; `requests_for_input` turns approval requests and
    function calls left without a result into workflow requests; `emit_response` adds an
    `AgentResponseEvent` to a streamed run; `output_response` says whether the response is a
    workflow output: by default (None) it is when the executor has no out-edges (the last
    agent of a chain answers the run) or the builder's ``output_from=`` names it.
    """

    def __init__(
        self,
        agent: Agent,
        *,
        id: str | None = None,
        thread: AgentThread | str | None = None,
        context_mode: ContextMode = "full",
        context_filter: ContextFilter | None = None,
        other_agents_as_user: bool = True,
        forward_incoming: bool = True,
        requests_for_input: bool = False,
        turn_token: bool = False,
        emit_response: bool = False,
        output_response: bool | None = None,
    ) -> None:
        super().__init__(id or agent.name)
        if context_mode not in ("full", "last_agent", "custom"):
            raise ConfigurationError(
                f"agent executor {self.id!r}: context_mode must be 'full', 'last_agent' or "
                f"'custom', not {context_mode!r}"
            )
        if (context_mode == "custom") != (context_filter is not None):
            raise ConfigurationError(
                f"agent executor {self.id!r}: context_mode='custom' needs context_filter=, "
                "and context_filter= needs context_mode='custom'"
            )
        self.agent = agent
        self.context_mode: ContextMode = context_mode
        self.context_filter = context_filter
        self.other_agents_as_user = other_agents_as_user
        self.forward_incoming = forward_incoming
        self.requests_for_input = requests_for_input
        self.turn_token = turn_token
        self.emit_response = emit_response
        self.output_response = output_response
        if isinstance(thread, AgentThread):
            self._thread_key = f"thread.{id_of(thread, self.id)}"
            self._seed_thread: AgentThread | None = thread
        else:
            self._thread_key = f"thread.{thread}" if thread else f"thread.own.{self.id}"
            self._seed_thread = None

    # -- inputs ------------------------------------------------------------------------

    @handler(output=[AgentExecutorResponse, TurnToken], workflow_output=AgentResponse)
    async def take_text(self, message: str, ctx: WorkflowContext[Any, Any]) -> None:
        """A user message as text."""
        await self._take([Message("user", message)], True, ctx)

    @handler(output=[AgentExecutorResponse, TurnToken], workflow_output=AgentResponse)
    async def take_message(self, message: Message, ctx: WorkflowContext[Any, Any]) -> None:
        """One message."""
        await self._take([message], True, ctx)

    @handler(output=[AgentExecutorResponse, TurnToken], workflow_output=AgentResponse)
    async def take_list(
        self, messages: list[str | Message], ctx: WorkflowContext[Any, Any]
    ) -> None:
        """Several messages (strings are user messages)."""
        await self._take(Message.coerce(messages), True, ctx)

    @handler(output=[AgentExecutorResponse, TurnToken], workflow_output=AgentResponse)
    async def take_request(
        self, request: AgentExecutorRequest, ctx: WorkflowContext[Any, Any]
    ) -> None:
        """Messages to cache, and whether to run the agent on them now."""
        await self._take(list(request.messages), request.should_respond, ctx)

    @handler(output=[AgentExecutorResponse, TurnToken], workflow_output=AgentResponse)
    async def take_response(
        self, response: AgentExecutorResponse, ctx: WorkflowContext[Any, Any]
    ) -> None:
        """An upstream agent executor's response, taken per `context_mode`."""
        await self._take(self._context_of(response), True, ctx)

    @handler(output=[AgentExecutorResponse, TurnToken], workflow_output=AgentResponse)
    async def take_responses(
        self, responses: list[AgentExecutorResponse], ctx: WorkflowContext[Any, Any]
    ) -> None:
        """A fan-in of agent executors: their contexts, each message once, in order."""
        seen: set[str] = set()
        messages: list[Message] = []
        for response in responses:
            for m in self._context_of(response):
                if m.message_id not in seen:
                    seen.add(m.message_id)
                    messages.append(m)
        await self._take(messages, True, ctx)

    def _context_of(self, response: AgentExecutorResponse) -> list[Message]:
        if self.context_mode == "full":
            return list(response.full_conversation)
        if self.context_mode == "last_agent":
            return list(response.agent_response.messages)
        assert self.context_filter is not None  # checked in __init__
        return list(self.context_filter(response))

    @handler(output=[AgentExecutorResponse, TurnToken], workflow_output=AgentResponse)
    async def take_turn(self, token: TurnToken, ctx: WorkflowContext[Any, Any]) -> None:
        """Run the agent on what is cached, then pass the token on."""
        state = self._state(ctx)
        await self._run_agent(state, ctx, stream=token.stream)
        await ctx.send_message(token)

    @response_handler(output=[AgentExecutorResponse, TurnToken], workflow_output=AgentResponse)
    async def take_answer(
        self, request: AgentRequest, answer: AgentAnswer, ctx: WorkflowContext[Any, Any]
    ) -> None:
        """An answer to one of the agent's requests; the agent runs once all are answered."""
        state = self._state(ctx)
        role: Literal["user", "tool"] = (
            "tool" if isinstance(answer, FunctionResultContent) else "user"
        )
        state.cache.append(Message(role, [answer]))
        state.waiting = [r for r in state.waiting if r != ctx.request_id]
        ctx.set_executor_state(state)
        if not state.waiting and not self.turn_token:
            await self._run_agent(state, ctx, stream=None)

    def _answers_as_output(self) -> bool:
        return True

    async def _initial_logs(self) -> dict[str, list[Any]]:
        """A run's copy of the thread given as ``thread=`` (the definition's is not changed)."""
        if self._seed_thread is None:
            return {}
        return {f"*/{self._thread_key}": list(await self._seed_thread.get_messages())}

    # -- the run -----------------------------------------------------------------------

    def _state(self, ctx: WorkflowContext[Any, Any]) -> AgentExecutorState:
        state = ctx._committed_executor_state()  # copied below, without its messages
        if state is None:
            return AgentExecutorState()
        if not isinstance(state, AgentExecutorState):
            raise ConfigurationError(
                f"agent executor {self.id!r} found executor state of type "
                f"{type(state).__name__}; only AgentExecutor may write its state"
            )
        return AgentExecutorState(
            list(state.cache),
            list(state.waiting),
            state.seeded,
            state.service_thread,
            state.service_seen,
        )

    async def _take(
        self, messages: list[Message], respond: bool, ctx: WorkflowContext[Any, Any]
    ) -> None:
        state = self._state(ctx)
        state.cache.extend(messages)
        ctx.set_executor_state(state)
        if respond and not self.turn_token and not state.waiting:
            await self._run_agent(state, ctx, stream=None)

    async def _run_agent(
        self, state: AgentExecutorState, ctx: WorkflowContext[Any, Any], *, stream: bool | None
    ) -> None:
        thread_log = ctx.log(self._thread_key, shared=True)
        # Executors sharing the thread that ran in one superstep may each have added the
        # same message: the model sees it once.
        known: set[str] = set()
        history: list[Message] = []
        for m in thread_log.entries:
            if m.message_id not in known:
                known.add(m.message_id)
                history.append(m)
        incoming = [m for m in state.cache if m.message_id not in known]
        if self.other_agents_as_user:
            incoming = as_user_messages(incoming, self.agent.name)
        thread = await self._thread_of(state)
        if isinstance(thread, ServiceThread):
            # The server keeps what this thread saw: send only what came after.
            seen = {m.message_id for m in thread_log.entries[: state.service_seen]}
            unseen = [m for m in history if m.message_id not in seen]
            if unseen:
                await thread.on_new_message(unseen)
            response = await self._call_agent(incoming, thread, ctx, stream)
            thread_log.extend([*incoming, *response.messages])
            state.service_thread = await thread.serialize()
            state.service_seen = len(thread_log.entries)
        else:
            if history:
                await thread.on_new_message(history)
            response = await self._call_agent(incoming, thread, ctx, stream)
            thread_log.extend((await thread.get_messages())[len(history) :])
        conversation = ctx.log(CONVERSATION)
        seen = {c.message_id for c in conversation.entries}
        conversation.extend([m for m in state.cache if m.message_id not in seen])
        conversation.extend(response.messages)
        state.cache = []
        if self.requests_for_input:
            for request in open_requests(response.messages):
                state.waiting.append(await ctx.request_info(request))
        ctx.set_executor_state(state)
        wanted = self.output_response
        if wanted or (wanted is None and ctx._answer_is_output):
            await ctx.yield_output(response)
        full = conversation.entries if self.forward_incoming else list(response.messages)
        await ctx.send_message(AgentExecutorResponse(self.id, response, full))

    async def _thread_of(self, state: AgentExecutorState) -> AgentThread:
        """The server thread this executor continues in this run, else a fresh local one."""
        if state.service_thread is not None:
            return await self.agent.deserialize_thread(state.service_thread)
        return self.agent.create_thread()

    async def _call_agent(
        self,
        messages: list[Message],
        thread: AgentThread,
        ctx: WorkflowContext[Any, Any],
        stream: bool | None,
    ) -> AgentResponse:
        kwargs: dict[str, Any] = {"tool_kwargs": dict(ctx.kwargs)}  # the run's kwargs go to tools
        streaming = ctx.streaming if stream is None else stream
        if not streaming:
            response = await self.agent.run(
                messages, thread=thread, cancellation_token=ctx.cancellation_token, **kwargs
            )
            await ctx.add_event(AgentResponseEvent(self.id, response))
            return response
        updates = self.agent.run_stream(
            messages, thread=thread, cancellation_token=ctx.cancellation_token, **kwargs
        )
        async for update in updates:
            await ctx.add_event(AgentUpdateEvent(self.id, update))
        response = updates.response
        if self.emit_response:
            await ctx.add_event(AgentResponseEvent(self.id, response))
        return response


_THREAD_KEYS: weakref.WeakKeyDictionary[AgentThread, str] = weakref.WeakKeyDictionary()


def id_of(thread: AgentThread, first_user: str) -> str:
    """A key for a thread object: its id when it has one, else the id of the first executor
    given it. Not its identity: the key is written into checkpoints, and a process that
    rebuilds the workflow (a resume elsewhere, a Ray worker) must find the same one."""
    try:
        ident = thread.id
    except Exception:  # a deleted thread, or one without an id yet
        ident = None
    return ident or _THREAD_KEYS.setdefault(thread, f"of.{first_user}")
