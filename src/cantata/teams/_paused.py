"""A participant's turn that waits for a person, and goes on once answered.

A participant agent's run may end asking for something only the caller can give: the
approval of a tool call (finish reason ``"approval_required"``, the response holding
`FunctionApprovalRequestContent`s) or the result of a tool declared without a function
(``"tool_calls"``, the calls left without a result). The participant then does not hand
the turn back: it makes each one a workflow request (so the team's run stops idle with it
pending, as magentic's plan review does: `TeamSession.pending_requests`, a streamed run's
`RequestInfoEvent`), keeps what the turn said so far as its executor state (`PausedTurn`,
in every checkpoint), and once every request is answered (`TeamSession.send_responses`)
runs the agent again on its own conversation with the answers, so the approved tool runs
(a rejected one gets the rejection as its result, which the model reads) and the turn
ends as any other, with everything it said, the answers included, handed to the manager.

Calls to tools the team itself declared (a handoff's transfer tools) are the team's to
answer: a turn that makes one ends as before. Only the finish reason is read on a turn
that asks for nothing, so a plain text turn costs what it did.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, NamedTuple, TypeAlias

from ..agents import Agent, AgentResponse
from ..core import (
    FunctionApprovalRequestContent,
    FunctionApprovalResponseContent,
    FunctionCallContent,
    FunctionResultContent,
    Message,
    Usage,
    WorkflowError,
    tracing,
)
from ..models import ChatOptions
from ..workflows import Executor, WorkflowContext, response_handler
from ..workflows._agent_messages import open_requests
from ._run_kwargs import turn_span
from .turns import PausedTurn, SpeakTurn, TurnDone, _authored

__all__ = ["ASKING", "PausingParticipant", "WentOn", "requests_of", "team_tools_of"]

ASKING = frozenset({"approval_required", "tool_calls"})
"""The finish reasons of an agent run that waits for the caller."""

Request: TypeAlias = FunctionApprovalRequestContent | FunctionCallContent


def requests_of(response: AgentResponse, team_tools: frozenset[str] = frozenset()) -> list[Request]:
    """What a run that finished asking (its finish reason is in `ASKING`) asks the caller:
    its approval requests, and its calls left without a result; none when it calls one of
    `team_tools` (tools the team declared, and answers itself)."""
    requests = open_requests(response.messages)
    if team_tools and any(
        type(r) is FunctionCallContent and r.name in team_tools for r in requests
    ):
        return []
    return requests


def team_tools_of(options: ChatOptions | None) -> frozenset[str]:
    """The names of the tools a team declared in a participant's run options."""
    if options is None or not options.tools:
        return frozenset()
    return frozenset(spec.name for spec in options.tools)


class WentOn(NamedTuple):
    """A paused turn's run on the answers: its response, the names of the tools the team
    declared for it (see `requests_of`), and how to read its channel's state should it
    pause again (None: it has none)."""

    response: AgentResponse
    team_tools: frozenset[str]
    channel_state: Callable[[], Awaitable[dict[str, Any] | None]] | None = None


def _inputs(paused: PausedTurn, name: str) -> list[Message]:
    """The answers as the agent takes them: results in one tool message, then approvals in
    one user message (the function loop reads approvals in the last message only)."""
    results: list[Any] = []
    approvals: list[Any] = []
    for request_id in paused.requests:
        for c in paused.answers[request_id].contents:
            (approvals if type(c) is FunctionApprovalResponseContent else results).append(c)
    out: list[Message] = []
    if results:
        out.append(Message("tool", results, author_name=name))
    if approvals:
        out.append(Message("user", approvals, author_name=name))
    return out


class PausingParticipant(Executor):
    """The part of a participant executor that pauses its turn for a person and goes on
    when answered; a subclass runs the agent again in `_go_on`."""

    agent: Agent

    def _pause(
        self,
        turn: SpeakTurn,
        messages: list[Message],
        requests: list[Request],
        usage: Usage,
        ctx: WorkflowContext[Any, Any],
        *,
        start: int = 0,
        channel_state: dict[str, Any] | None = None,
    ) -> None:
        """Ask the caller each request; keep the turn so far until all are answered."""
        ids = [ctx.request_info(r).value for r in requests]
        paused = PausedTurn(
            turn.correlation_id, turn.turn, messages, ids, {}, usage, start, channel_state
        )
        ctx.set_executor_state(paused)

    @response_handler(output=TurnDone)
    async def take_approval(
        self,
        request: FunctionApprovalRequestContent,
        answer: FunctionApprovalResponseContent,
        ctx: WorkflowContext[Any, Any],
    ) -> None:
        """A person approved or rejected a tool call of this participant's turn."""
        await self._answered(Message("user", [answer], author_name=self.agent.name), ctx)

    @response_handler(output=TurnDone)
    async def take_result(
        self,
        request: FunctionCallContent,
        answer: FunctionResultContent,
        ctx: WorkflowContext[Any, Any],
    ) -> None:
        """The caller gave the result of a call to a tool declared without a function."""
        await self._answered(Message("tool", [answer], author_name=self.agent.name), ctx)

    async def _answered(self, answer: Message, ctx: WorkflowContext[Any, Any]) -> None:
        paused = ctx.get_executor_state()
        request_id = ctx.request_id
        if not isinstance(paused, PausedTurn) or request_id not in paused.requests:
            raise WorkflowError(
                f"participant {self.id!r} got an answer to request {request_id!r}, but no turn "
                "of it waits for one"
            )
        paused.answers[request_id] = answer
        if paused.waiting:
            ctx.set_executor_state(paused)
            return
        ctx.set_executor_state(None)
        inputs = _inputs(paused, self.agent.name)
        turn = SpeakTurn(paused.correlation_id, paused.turn)
        if tracing.enabled():
            with turn_span(ctx, turn, self.agent.name):
                went = await self._go_on(paused, inputs, ctx)
        else:
            went = await self._go_on(paused, inputs, ctx)
        response = went.response
        said = [*paused.messages, *inputs, *response.messages]
        usage = paused.usage + (response.usage or Usage())
        if response.finish_reason in ASKING:
            requests = requests_of(response, went.team_tools)
            if requests:
                state = await went.channel_state() if went.channel_state is not None else None
                self._pause(
                    turn, said, requests, usage, ctx, start=paused.start, channel_state=state
                )
                return
        name = self.agent.name
        ctx.send_message(TurnDone(name, _authored(said, name), usage, self._went_on(said, ctx)))

    async def _go_on(
        self, paused: PausedTurn, inputs: list[Message], ctx: WorkflowContext[Any, Any]
    ) -> WentOn:
        """Run the agent again on its turn so far (`paused.messages`) and the answers."""
        raise NotImplementedError

    def _went_on(self, said: list[Message], ctx: WorkflowContext[Any, Any]) -> str:
        """The turn is done (it said `said`): the key of the channel that holds it."""
        return ""
