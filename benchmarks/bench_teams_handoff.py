"""Handoff teams: a handoff chain beside AutoGen's Swarm and Agent Framework's
HandoffBuilder, and the routing evaluation on the embedded model.

Workloads:

- a handoff chain of 10 agents whose model answers at once (turns per second): agent i
  hands off to agent i+1 with one tool call, the last hands off to the user, which ends
  the run. cantata `Handoff` with declared edges and the `Handoff("user")` termination on
  `ScriptedChatClient`; AutoGen's `Swarm` of `AssistantAgent`s with `handoffs=` and
  `HandoffTermination("user")` on a model client that answers at once; Agent Framework's
  `HandoffBuilder` with the same edges, its agents on a client that answers at once, ended
  by a termination condition when the last agent has spoken. Each run is a new
  conversation (a new session; AutoGen's team is reset; Agent Framework's workflow is
  built anew) and is checked to have taken exactly 10 turns.
- routing evaluation on the embedded model (SmolLM2-135M): the triage team of
  `examples/handoff_triage.py` and a selector chat of the same two specialists, on
  labelled tasks; accuracy, fallback rate, average turns and early/late endings (no peer).
"""

from __future__ import annotations

import importlib.util
import itertools
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from _harness import Row, best_rate, peer_version
from _team_peers import agent_framework_client, autogen_client, quiet_agent_framework
from cantata.agents import ChatAgent
from cantata.models import ChatOptions, ScriptedChatClient, tool_call
from cantata.teams.group_chat import GroupChat
from cantata.teams.handoff import USER, Handoff, handoff_of
from cantata.teams.routing_eval import LabelledTask, RoutingReport, evaluate_routing
from cantata.teams.speakers import Selector
from cantata.teams.termination import Handoff as HandoffTermination
from cantata.teams.termination import MaxMessage

CHAIN = 10
RUNS = 20
MAX_REPEAT = 2  # the local-model rows take minutes; the chain rows are best-of inside

# -- cantata ----------------------------------------------------------------------------


def _ours() -> Callable[[], Awaitable[None]]:
    names = [f"a{i}" for i in range(CHAIN)]
    agents = []
    for i, name in enumerate(names):
        target = names[i + 1] if i + 1 < CHAIN else USER
        call = [tool_call(f"transfer_to_{target}", {"summary": "go on"})]
        agents.append(ChatAgent(ScriptedChatClient(lambda m, o, c=call: c), name=name))
    edges = {name: [names[i + 1] if i + 1 < CHAIN else USER] for i, name in enumerate(names)}
    team = Handoff(agents, handoffs=edges, termination=HandoffTermination(USER))

    async def runs() -> None:
        for _ in range(RUNS):
            result = await team.create_session().run("start")
            # a0..a8 hand on and a9 hands off to the user, which ends the run: a handoff
            # message each (a handoff is carried out before termination is checked)
            turns = sum(1 for m in result.messages if handoff_of(m) is not None)
            stop = result.stop_message
            if turns != CHAIN or stop is None or stop.content != f"a{CHAIN - 1} handed off to user":
                raise RuntimeError(f"cantata took {turns} turns")

    return runs


# -- AutoGen AgentChat ------------------------------------------------------------------


def _autogen() -> Callable[[], Awaitable[None]] | None:
    if peer_version("autogen-agentchat") is None:
        return None
    from autogen_agentchat.agents import AssistantAgent
    from autogen_agentchat.conditions import HandoffTermination as AGHandoffTermination
    from autogen_agentchat.messages import HandoffMessage
    from autogen_agentchat.teams import Swarm
    from autogen_core import FunctionCall

    ids = itertools.count()
    agents = []
    for i in range(CHAIN):
        target = f"a{i + 1}" if i + 1 < CHAIN else "user"

        def answer(t: str = target) -> list[Any]:
            return [FunctionCall(id=f"c{next(ids)}", arguments="{}", name=f"transfer_to_{t}")]

        agents.append(
            AssistantAgent(
                f"a{i}",
                model_client=autogen_client(
                    answer, function_calling=True, finish_reason="function_calls"
                ),
                handoffs=[target],
            )
        )
    team = Swarm(agents, termination_condition=AGHandoffTermination(target="user"))

    async def runs() -> None:
        for _ in range(RUNS):
            result = await team.run(task="start")
            await team.reset()
            turns = sum(1 for m in result.messages if isinstance(m, HandoffMessage))
            if turns != CHAIN:
                raise RuntimeError(f"AutoGen took {turns} turns")

    return runs


# -- Agent Framework --------------------------------------------------------------------


def _agent_framework() -> Callable[[], Awaitable[None]] | None:
    if peer_version("agent-framework-orchestrations") is None:
        return None
    from agent_framework import Agent, Content
    from agent_framework_orchestrations import HandoffBuilder

    quiet_agent_framework()
    spoken = [0]
    ids = itertools.count()

    def client(target: str | None) -> Any:
        """Hands off to `target` at once (or, last of the chain, answers)."""

        def content() -> Any:
            spoken[0] += 1
            if target is None:
                return Content.from_text("done")
            return Content.from_function_call(
                call_id=f"c{next(ids)}", name=f"handoff_to_{target}", arguments="{}"
            )

        return agent_framework_client(content)

    names = [f"a{i}" for i in range(CHAIN)]

    async def runs() -> None:
        for _ in range(RUNS):
            agents = [
                Agent(
                    client(names[i + 1] if i + 1 < CHAIN else None),
                    name=n,
                    require_per_service_call_history_persistence=True,
                )
                for i, n in enumerate(names)
            ]
            builder = HandoffBuilder(
                participants=agents,
                termination_condition=lambda conversation: any(
                    m.author_name == names[-1] for m in conversation if m.role == "assistant"
                ),
            ).with_start_agent(agents[0])
            for i in range(CHAIN - 1):
                builder = builder.add_handoff(agents[i], [agents[i + 1]])
            before = spoken[0]
            await builder.build().run("start")
            if spoken[0] - before < CHAIN:
                raise RuntimeError(f"Agent Framework took {spoken[0] - before} turns")

    return runs


# -- routing evaluation on the local model ----------------------------------------------

TASKS = [
    LabelledTask("How much is invoice INV-7?", "billing"),
    LabelledTask("Is the VPN down right now?", "tech_support"),
    LabelledTask("I was charged twice for invoice INV-8, can I get a refund?", "billing"),
    LabelledTask("My email does not load since this morning.", "tech_support"),
    LabelledTask("Has invoice INV-8 been paid?", "billing"),
    LabelledTask("The VPN is very slow, is there an outage?", "tech_support"),
]


def _triage_example() -> Any:
    path = Path(__file__).resolve().parents[1] / "examples" / "handoff_triage.py"
    spec = importlib.util.spec_from_file_location("handoff_triage_example", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def _routing(quick: bool) -> list[tuple[str, RoutingReport]]:
    from cantata.models import LocalChatClient

    client = LocalChatClient()
    tasks = TASKS[:2] if quick else TASKS
    example = _triage_example()
    handoff = example.build_team(client)
    billing, tech = handoff.participants[1], handoff.participants[2]
    selector = GroupChat(
        [billing, tech],
        speaker=Selector(client, options=ChatOptions(temperature=0.0)),
        termination=MaxMessage(2),  # the task and the chosen specialist's answer
        name="selector",
    )
    return [
        ("handoff triage", await evaluate_routing(handoff, tasks)),
        ("selector", await evaluate_routing(selector, tasks)),
    ]


def _routing_rows(label: str, report: RoutingReport) -> list[Row]:
    n = len(report.outcomes)
    base = f"routing eval on the local model, {label} ({n} labelled tasks)"
    note = "SmolLM2-135M; choice constrained to real participants by grammar"
    return [
        Row(f"{base}: choice accuracy", "%", 100 * report.accuracy, note=note),
        Row(f"{base}: fallback rate", "%", 100 * report.fallback_rate, higher_is_better=False),
        Row(f"{base}: average turns", "turns", report.average_turns, higher_is_better=False),
        Row(f"{base}: early endings", "%", 100 * report.early_rate, higher_is_better=False),
        Row(f"{base}: late endings", "%", 100 * report.late_rate, higher_is_better=False),
    ]


async def collect(quick: bool) -> list[Row]:
    """The handoff chain beside the peers, then the routing evaluation."""
    global RUNS
    RUNS = 5 if quick else 20
    repeat = 3 if quick else 5
    work = RUNS * CHAIN
    ours = await best_rate(_ours(), work, repeat=repeat)
    rows: list[Row] = []
    for peer_name, dist, make in (
        ("autogen-agentchat Swarm", "autogen-agentchat", _autogen),
        ("agent-framework HandoffBuilder", "agent-framework-orchestrations", _agent_framework),
    ):
        fn = make()
        rows.append(
            Row(
                f"handoff chain of {CHAIN} agents (scripted models)",
                "turns/s",
                ours,
                peer=await best_rate(fn, work, repeat=repeat) if fn is not None else None,
                peer_name=peer_name,
                peer_version=peer_version(dist),
                headline=True,
            )
        )
    for label, report in await _routing(quick):
        print(f"\n{label} routing on the local model:\n{report.as_table()}")
        rows.extend(_routing_rows(label, report))
    return rows


if __name__ == "__main__":
    import asyncio

    for row in asyncio.run(collect(quick=True)):
        print(json.dumps(row.to_dict()))
