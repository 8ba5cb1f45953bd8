"""A handoff is carried out before termination is checked: a run that stops on the turn
whose message is a transfer call (whatever stops it) leaves the call with its result, the
handoff note in the transcript, and the next run starts with the agent handed to; the
same after a checkpoint and a resume."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest

from cantata.agents import ChatAgent
from cantata.core import Message, TextContent, Usage
from cantata.models import ChatOptions, ScriptedChatClient, ScriptedTurn, tool_call
from cantata.stores import SQLiteStore
from cantata.teams import External, TeamSession
from cantata.teams.handoff import Handoff, handoff_of
from cantata.teams.termination import (
    Functional,
    FunctionCall,
    MaxMessage,
    SourceMatch,
    TerminationCondition,
    TextMention,
    Timeout,
    TokenUsage,
)
from cantata.teams.termination import Handoff as HandoffTermination
from cantata.workflows import StateStoreCheckpointStore


def _triage(*, slow: bool = False) -> ChatAgent:
    """Hands off to billing (with words beside the call); `slow`: after 50 ms."""

    async def answer(messages: list[Message], options: ChatOptions) -> ScriptedTurn:
        if slow:
            await asyncio.sleep(0.05)
        call = tool_call("transfer_to_billing", {"summary": "refund"})
        return Message("assistant", [TextContent("passing you to billing"), call])

    usage = Usage(input_tokens=3, output_tokens=2)
    return ChatAgent(ScriptedChatClient(answer, usage=usage), name="triage")


def _billing() -> ChatAgent:
    def answer(messages: list[Message], options: ChatOptions) -> str:
        return "billing here"

    return ChatAgent(ScriptedChatClient(answer), name="billing")


def _team(
    termination: TerminationCondition | None, max_turns: int | None = None, *, slow: bool = False
) -> Handoff:
    return Handoff(
        [_triage(slow=slow), _billing()],
        handoffs={"triage": ["billing"]},
        termination=termination,
        max_turns=max_turns,
    )


def _dangling(messages: list[Message]) -> set[str]:
    """Ids of function calls among `messages` that have no result there."""
    calls = {c.call_id for m in messages for c in m.function_calls}
    results = {r.call_id for m in messages for r in m.function_results}
    return calls - results


def _shown_to(agent: ChatAgent) -> list[Message]:
    """What the agent's model was shown at its last call."""
    client = agent.client
    assert isinstance(client, ScriptedChatClient)
    return list(client.calls[-1].messages)


def _external() -> TerminationCondition:
    """An External condition set from outside while the handoff turn is checked (by the
    condition before it, which sees the triage's message)."""
    outside = External()

    def set_it(messages: object) -> bool:
        seen = list(messages)  # type: ignore[call-overload]
        if seen and seen[0].author_name == "triage":
            outside.set()
        return False

    return Functional(set_it) | outside


# Every kind of termination, each set to fire on the handoff turn (the task is its first
# check, the triage turn its second).
KINDS: dict[str, Callable[[], tuple[TerminationCondition | None, int | None]]] = {
    "MaxMessage": lambda: (MaxMessage(2), None),
    "max_turns": lambda: (None, 1),
    "Handoff to the target": lambda: (HandoffTermination("billing"), None),
    "TextMention": lambda: (TextMention("passing"), None),
    "SourceMatch": lambda: (SourceMatch("triage"), None),
    "TokenUsage": lambda: (TokenUsage(5), None),
    "Timeout": lambda: (Timeout(0.02), None),
    "Functional": lambda: (Functional(lambda ms: any(m.function_calls for m in ms)), None),
    "External": lambda: (_external(), None),
    "or": lambda: (MaxMessage(50) | SourceMatch("triage"), None),
    "and": lambda: (MaxMessage(2) & TextMention("passing"), None),
}


@pytest.mark.parametrize("kind", sorted(KINDS))
async def test_a_run_stopped_on_the_handoff_turn_carries_it_out(kind: str) -> None:
    termination, max_turns = KINDS[kind]()
    # Timeout: the deadline passes while the (slow) triage turn runs
    team = _team(termination, max_turns, slow=kind == "Timeout")
    session = team.create_session()
    result = await session.run("I want a refund")
    assert result.stop_message is not None
    assert result.messages[-1].author_name == "triage"
    info = handoff_of(result.messages[-1])
    assert info is not None and info.target == "billing"
    assert _dangling(result.messages) == set()  # the call's result is in the transcript
    second = await session.run("hello again")
    assert [m.author_name for m in second.messages[1:]] == ["billing"]
    assert second.messages[-1].text == "billing here"
    billing = team.participants[1]
    assert isinstance(billing, ChatAgent)
    assert _dangling(_shown_to(billing)) == set()  # what the next model call reads


async def test_function_call_termination_does_not_fire_on_a_transfer() -> None:
    # The team answers a transfer call itself; FunctionCall looks for a tool's result in a
    # turn's own messages, which a transfer's turn does not hold (see migration.md).
    team = _team(FunctionCall("transfer_to_billing") | MaxMessage(3))
    result = await team.create_session().run("task")
    assert result.stop_message is not None and result.stop_message.source == "MaxMessage"


async def test_a_stop_on_the_handoff_turn_survives_a_checkpoint_and_resume(
    tmp_path: Path,
) -> None:
    store = StateStoreCheckpointStore(SQLiteStore(tmp_path / "handoff.db"))
    try:
        session = _team(MaxMessage(2)).create_session(checkpoint_store=store)
        first = await session.run("task")
        assert handoff_of(first.messages[-1]) is not None
        checkpoint = session.checkpoint_id
        assert checkpoint is not None
        resumed: TeamSession = await _team(MaxMessage(2)).resume(checkpoint, checkpoint_store=store)
        second = await resumed.run("again")
        assert [m.author_name for m in second.messages[1:]] == ["billing"]
        assert _dangling([*first.messages, *second.messages]) == set()
    finally:
        await store.close()


async def test_a_handoff_to_the_user_that_stops_the_run_returns_to_the_asker() -> None:
    def answer(messages: list[Message], options: ChatOptions) -> ScriptedTurn:
        if messages[-1].text == "my order is 7":
            return "thanks, done"
        return [tool_call("transfer_to_user", {"summary": "which order?"})]

    asker = ChatAgent(ScriptedChatClient(answer), name="asker")
    team = Handoff(
        [asker, _billing()],
        handoffs={"asker": ["user"]},
        termination=HandoffTermination("user"),
    )
    session = team.create_session()
    first = await session.run("refund please")
    assert first.stop_message is not None and first.stop_message.source == "Handoff"
    assert handoff_of(first.messages[-1]) is not None
    second = await session.run("my order is 7")
    assert [m.author_name for m in second.messages[1:]] == ["asker"]
