"""Group chats: cantata's GroupChat against AutoGen AgentChat and Agent Framework, same run.

Workloads (issue 10), each on one team definition reused for every run:

- round robin of 4 agents whose model answers at once, 40 turns per run, many runs
  (turns per second): cantata `GroupChat(speaker=RoundRobin())` on `ScriptedChatClient`,
  AutoGen's `RoundRobinGroupChat` of `AssistantAgent`s on a model client that answers at
  once, Agent Framework's `GroupChatBuilder` with a round-robin selection function;
- the same round robin with agents that have no model at all (each answers "ok" in its
  own code), to show the team machinery alone, against AutoGen with `BaseChatAgent`s;
- a selector chat of 4 agents, 40 turns per run, the selector's model naming the next
  speaker at once (turns per second): cantata `Selector` against AutoGen's
  `SelectorGroupChat`.

Every framework runs its agents through its own agent class and model-client protocol, and
each run is a fresh conversation: a new session for cantata, `reset()` for AutoGen (its
teams are reused that way), a newly built workflow for Agent Framework (a built group chat
keeps its round count, so it serves one conversation). Every run checks that
it took exactly 40 turns.
"""

from __future__ import annotations

import itertools
import json
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from typing import Any

from _harness import Row, best_rate, peer_version
from cantata.agents import Agent, AgentInput, AgentResponse, ChatAgent
from cantata.core import Message
from cantata.models import ChatOptions, ScriptedChatClient
from cantata.teams import GroupChat, RoundRobin, Selector

AGENTS = 4
TURNS = 40

# -- cantata ----------------------------------------------------------------------------


def _ours_team(selector: bool) -> GroupChat:
    agents = [
        ChatAgent(ScriptedChatClient(lambda m, o: "ok"), name=f"a{i}", description=f"agent {i}")
        for i in range(AGENTS)
    ]
    if not selector:
        return GroupChat(agents, speaker=RoundRobin(), max_turns=TURNS)
    names = itertools.cycle([a.name for a in agents])

    def pick(messages: list[Message], options: ChatOptions) -> str:
        return json.dumps({"speaker": next(names)})

    return GroupChat(agents, speaker=Selector(ScriptedChatClient(pick)), max_turns=TURNS)


class _Echo(Agent):
    """An agent with no model at all: it answers "ok" at once (the team machinery alone)."""

    async def run(self, messages: AgentInput = None, **kwargs: Any) -> AgentResponse:
        return AgentResponse([Message("assistant", "ok", author_name=self.name)])


def _ours(selector: bool, *, echo: bool = False) -> Callable[[], Awaitable[None]]:
    if echo:
        team = GroupChat([_Echo(name=f"a{i}") for i in range(AGENTS)], max_turns=TURNS)
    else:
        team = _ours_team(selector)

    async def runs() -> None:
        for _ in range(RUNS):
            session = team.create_session()
            result = await session.run("start")
            if len(result.messages) != TURNS + 1:
                raise RuntimeError(f"cantata took {len(result.messages) - 1} turns")

    return runs


# -- AutoGen AgentChat --------------------------------------------------------------------


def _autogen_client(answers: Callable[[], str]) -> Any:
    from autogen_core.models import (
        ChatCompletionClient,
        CreateResult,
        ModelFamily,
        ModelInfo,
        RequestUsage,
    )

    class InstantClient(ChatCompletionClient):  # type: ignore[misc]
        """Answers every request at once with the next scripted text."""

        _info = ModelInfo(
            vision=False,
            function_calling=False,
            json_output=False,
            family=ModelFamily.UNKNOWN,
            structured_output=False,
        )

        async def create(self, messages: Sequence[Any], **kwargs: Any) -> CreateResult:
            return CreateResult(
                finish_reason="stop",
                content=answers(),
                usage=RequestUsage(prompt_tokens=0, completion_tokens=0),
                cached=False,
            )

        def create_stream(self, messages: Sequence[Any], **kwargs: Any) -> AsyncGenerator[Any]:
            async def gen() -> AsyncGenerator[Any]:
                yield await self.create(messages)

            return gen()

        async def close(self) -> None:
            pass

        def actual_usage(self) -> RequestUsage:
            return RequestUsage(prompt_tokens=0, completion_tokens=0)

        def total_usage(self) -> RequestUsage:
            return RequestUsage(prompt_tokens=0, completion_tokens=0)

        def count_tokens(self, messages: Sequence[Any], **kwargs: Any) -> int:
            return 0

        def remaining_tokens(self, messages: Sequence[Any], **kwargs: Any) -> int:
            return 1_000_000

        @property
        def capabilities(self) -> Any:
            return self._info

        @property
        def model_info(self) -> ModelInfo:
            return self._info

    return InstantClient()


def _autogen_echo(name: str) -> Any:
    from autogen_agentchat.agents import BaseChatAgent
    from autogen_agentchat.base import Response
    from autogen_agentchat.messages import TextMessage

    class Echo(BaseChatAgent):  # type: ignore[misc]
        """An agent with no model at all: it answers "ok" at once."""

        @property
        def produced_message_types(self) -> Sequence[type]:
            return (TextMessage,)

        async def on_messages(self, messages: Sequence[Any], cancellation_token: Any) -> Any:
            return Response(chat_message=TextMessage(content="ok", source=self.name))

        async def on_reset(self, cancellation_token: Any) -> None:
            pass

    return Echo(name, description=name)


def _autogen(selector: bool, *, echo: bool = False) -> Callable[[], Awaitable[None]] | None:
    if peer_version("autogen-agentchat") is None:
        return None
    from autogen_agentchat.agents import AssistantAgent
    from autogen_agentchat.teams import RoundRobinGroupChat, SelectorGroupChat

    agents: list[Any] = [
        _autogen_echo(f"a{i}")
        if echo
        else AssistantAgent(
            f"a{i}", model_client=_autogen_client(lambda: "ok"), description=f"a{i}"
        )
        for i in range(AGENTS)
    ]
    if selector:
        names = itertools.cycle([a.name for a in agents])
        team: Any = SelectorGroupChat(
            agents, model_client=_autogen_client(lambda: next(names)), max_turns=TURNS
        )
    else:
        team = RoundRobinGroupChat(agents, max_turns=TURNS)

    async def runs() -> None:
        for _ in range(RUNS):
            result = await team.run(task="start")
            await team.reset()
            if len(result.messages) != TURNS + 1:
                raise RuntimeError(f"AutoGen took {len(result.messages) - 1} turns")

    return runs


# -- Agent Framework ----------------------------------------------------------------------


def _agent_framework() -> Callable[[], Awaitable[None]] | None:
    if peer_version("agent-framework-orchestrations") is None:
        return None
    from agent_framework import (
        Agent,
        BaseChatClient,
        ChatMiddlewareLayer,
        ChatResponse,
        Content,
        FunctionInvocationLayer,
    )
    from agent_framework import Message as AFMessage
    from agent_framework.observability import ChatTelemetryLayer
    from agent_framework_orchestrations import GroupChatBuilder, GroupChatState

    # its orchestrator logs a warning at every run's end ("reached max_rounds"): quiet it
    logging.getLogger("agent_framework").setLevel(logging.ERROR)
    logging.getLogger("agent_framework_orchestrations").setLevel(logging.ERROR)
    calls = [0]

    class InstantClient(  # type: ignore[misc]
        ChatMiddlewareLayer, FunctionInvocationLayer, ChatTelemetryLayer, BaseChatClient
    ):
        """Answers at once, with the same function loop layers an Agent normally has."""

        def _inner_get_response(
            self, *, messages: Any, stream: bool, options: Any, **kwargs: Any
        ) -> Any:
            async def answer() -> Any:
                calls[0] += 1
                text = Content.from_text("ok")
                return ChatResponse(messages=[AFMessage(role="assistant", contents=[text])])

            return answer()

    agents = [Agent(InstantClient(), name=f"a{i}", description=f"agent {i}") for i in range(AGENTS)]
    order = [a.name for a in agents]

    def round_robin(state: GroupChatState) -> str:
        return order[state.current_round % len(order)]

    async def runs() -> None:
        for _ in range(RUNS):
            # a built workflow keeps its orchestrator's round count: one per conversation
            workflow = GroupChatBuilder(
                participants=agents, selection_func=round_robin, max_rounds=TURNS
            ).build()
            before = calls[0]
            await workflow.run("start")
            if calls[0] - before != TURNS:
                raise RuntimeError(f"Agent Framework took {calls[0] - before} turns")

    return runs


RUNS = 20


async def collect(quick: bool) -> list[Row]:
    """Round robin and selector chats, ours and the peers', in one run."""
    global RUNS
    RUNS = 5 if quick else 20
    repeat = 3 if quick else 5
    work = RUNS * TURNS
    rows: list[Row] = []
    ours_rr = await best_rate(_ours(False), work, repeat=repeat)
    for peer_name, dist, make in (
        ("autogen-agentchat RoundRobinGroupChat", "autogen-agentchat", lambda: _autogen(False)),
        (
            "agent-framework GroupChatBuilder (round-robin selection_func)",
            "agent-framework-orchestrations",
            _agent_framework,
        ),
    ):
        fn = make()
        rows.append(
            Row(
                f"group chat round robin, {AGENTS} agents x {TURNS} turns",
                "turns/s",
                ours_rr,
                peer=await best_rate(fn, work, repeat=repeat) if fn is not None else None,
                peer_name=peer_name,
                peer_version=peer_version(dist),
                goal=">= 10x",
                headline=True,
            )
        )
    echo_peer = _autogen(False, echo=True)
    rows.append(
        Row(
            f"group chat round robin, agents without a model, {AGENTS} x {TURNS} turns",
            "turns/s",
            await best_rate(_ours(False, echo=True), work, repeat=repeat),
            peer=await best_rate(echo_peer, work, repeat=repeat) if echo_peer else None,
            peer_name="autogen-agentchat RoundRobinGroupChat (BaseChatAgent echo)",
            peer_version=peer_version("autogen-agentchat"),
            note="the team machinery alone: agents answer without any model client",
        )
    )
    peer_sel = _autogen(True)
    rows.append(
        Row(
            f"group chat selector (scripted selector model), {AGENTS} agents x {TURNS} turns",
            "turns/s",
            await best_rate(_ours(True), work, repeat=repeat),
            peer=await best_rate(peer_sel, work, repeat=repeat) if peer_sel is not None else None,
            peer_name="autogen-agentchat SelectorGroupChat",
            peer_version=peer_version("autogen-agentchat"),
        )
    )
    return rows
