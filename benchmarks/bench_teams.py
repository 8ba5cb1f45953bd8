"""Group chats: cantata's GroupChat against AutoGen AgentChat and Agent Framework, same run.

Workloads, each on one team definition reused for every run:

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
keeps its round count, so it serves one conversation). The round robin is measured on
cantata's two paths: a new session per run, and AutoGen's own way, ``team.run()`` then
``team.reset()`` on the team's default session (the row marked ``team.run() +
team.reset()``). Every run checks that it took exactly 40 turns.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from _harness import Row, best_rate, peer_version
from _team_peers import agent_framework_client, autogen_client, quiet_agent_framework
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


def _ours(
    selector: bool, *, echo: bool = False, autogen_style: bool = False
) -> Callable[[], Awaitable[None]]:
    if echo:
        team = GroupChat([_Echo(name=f"a{i}") for i in range(AGENTS)], max_turns=TURNS)
    else:
        team = _ours_team(selector)

    async def runs() -> None:
        for _ in range(RUNS):
            if autogen_style:  # the team's own session, reset after each run, as AutoGen does
                result = await team.run("start")
                await team.reset()
            else:
                result = await team.create_session().run("start")
            if len(result.messages) != TURNS + 1:
                raise RuntimeError(f"cantata took {len(result.messages) - 1} turns")

    return runs


# -- AutoGen AgentChat --------------------------------------------------------------------


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
        else AssistantAgent(f"a{i}", model_client=autogen_client(lambda: "ok"), description=f"a{i}")
        for i in range(AGENTS)
    ]
    if selector:
        names = itertools.cycle([a.name for a in agents])
        team: Any = SelectorGroupChat(
            agents, model_client=autogen_client(lambda: next(names)), max_turns=TURNS
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
    from agent_framework import Agent, Content
    from agent_framework_orchestrations import GroupChatBuilder, GroupChatState

    quiet_agent_framework()
    calls = [0]

    def ok() -> Any:
        calls[0] += 1
        return Content.from_text("ok")

    agents = [
        Agent(agent_framework_client(ok), name=f"a{i}", description=f"agent {i}")
        for i in range(AGENTS)
    ]
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
    ours_style = await best_rate(_ours(False, autogen_style=True), work, repeat=repeat)
    for peer_name, dist, make in (
        ("autogen-agentchat RoundRobinGroupChat", "autogen-agentchat", lambda: _autogen(False)),
        (
            "agent-framework GroupChatBuilder (round-robin selection_func)",
            "agent-framework-orchestrations",
            _agent_framework,
        ),
    ):
        fn = make()
        peer = await best_rate(fn, work, repeat=repeat) if fn is not None else None
        for path, ours in (("", ours_rr), (", team.run() + team.reset()", ours_style)):
            rows.append(
                Row(
                    f"group chat round robin, {AGENTS} agents x {TURNS} turns{path}",
                    "turns/s",
                    ours,
                    peer=peer,
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
