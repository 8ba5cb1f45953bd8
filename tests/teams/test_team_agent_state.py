"""A team used as an agent keeps its state between turns in the conversation: the agent
handed to, the round robin's place, as the next `team.run()` of one session would; on a
thread (its last answer's metadata), and on a history a client sends back as plain role
and text (looked up by the conversation's text). Termination counts the messages of the
run, not the history; a system prompt is context, never a turn; usage adds up the agents'."""

from __future__ import annotations

import json

import pytest

from cantata.agents import AgentResponse, ChatAgent, LocalThread, UnknownOptionError
from cantata.core import Message, Usage, from_json
from cantata.models import ChatOptions, ScriptedChatClient
from cantata.stores import MemoryStore
from cantata.teams import (
    STATE_KEY,
    GroupChat,
    Magentic,
    MaxMessage,
    TaskLedger,
    TaskResult,
    waits_for_user,
)
from cantata.workflows import StateStoreCheckpointStore

from ._desk import CALL_USAGE, make_desk, make_trio
from ._magentic_script import ManagerScript, progress


def said(messages: list[Message]) -> list[tuple[str | None, str]]:
    return [(m.author_name, m.text) for m in messages if m.role == "assistant" and m.text]


def answers(result: TaskResult) -> list[tuple[str | None, str]]:
    return said(result.messages)


def as_text(response: AgentResponse) -> str:
    """The answer as a chat client reads it: its assistant texts, a blank line between."""
    return "\n\n".join(m.text for m in response.messages if m.role == "assistant" and m.text)


async def test_a_follow_up_goes_to_the_agent_handed_to_as_in_process() -> None:
    team = make_desk()
    first = await team.run("Is INV-7 paid?")
    second = await team.run("And INV-8?")
    assert answers(second) == [("billing", "billing: about 'And INV-8?'")]

    agent = make_desk().as_agent()
    one = await agent.run("Is INV-7 paid?")
    two = await agent.run("And INV-8?", thread=one.thread)
    assert said(one.messages) == answers(first)
    assert said(two.messages) == answers(second)
    assert waits_for_user(one.messages) and waits_for_user(two.messages)
    assert one.messages[-1].metadata[STATE_KEY]["team"] == "desk"


async def test_the_state_travels_with_a_serialized_thread() -> None:
    agent = make_desk().as_agent()
    one = await agent.run("Is INV-7 paid?")
    assert one.thread is not None
    data = await one.thread.serialize()
    other = make_desk().as_agent()  # another process: no memory of the conversation
    thread = await other.deserialize_thread(data)
    two = await other.run("And INV-8?", thread=thread)
    assert said(two.messages) == [("billing", "billing: about 'And INV-8?'")]


async def test_a_history_sent_back_as_plain_text_goes_on_with_the_agent_handed_to() -> None:
    agent = make_desk().as_agent()
    one = await agent.run([Message("system", "Be brief."), Message("user", "Is INV-7 paid?")])
    # what a chat client sends next: role and content only, the answer as one message
    history = [
        Message("system", "Be brief."),
        Message("user", "Is INV-7 paid?"),
        Message("assistant", as_text(one)),
        Message("user", "And INV-8?"),
    ]
    two = await agent.run(history, thread=LocalThread())
    assert said(two.messages) == [("billing", "billing: about 'And INV-8?'")]
    # whitespace a client folds changes nothing
    history[2] = Message("assistant", "  " + as_text(one).replace("\n\n", "\n") + "\n")
    again = await agent.run(history, thread=LocalThread())
    assert said(again.messages) == [("billing", "billing: about 'And INV-8?'")]
    # an unknown conversation starts at the start agent
    history[2] = Message("assistant", "something else")
    fresh = await agent.run(history, thread=LocalThread())
    assert said(fresh.messages)[0][0] == "triage"


async def test_another_agent_over_the_same_store_reads_the_state_of_a_plain_history() -> None:
    async with MemoryStore() as store:
        checkpoints = StateStoreCheckpointStore(store)
        one_worker = make_desk().as_agent()
        one_worker.checkpoint_store = checkpoints
        other_worker = make_desk().as_agent()
        other_worker.checkpoint_store = checkpoints
        one = await one_worker.run("Is INV-7 paid?")
        history = [
            Message("user", "Is INV-7 paid?"),
            Message("assistant", as_text(one)),
            Message("user", "And INV-8?"),
        ]
        two = await other_worker.run(history, thread=LocalThread())
        assert said(two.messages) == [("billing", "billing: about 'And INV-8?'")]
        # the store keeps every conversation's state; the processes over it keep none
        assert not one_worker._carries and not other_worker._carries
        assert len(await store.keys("team-carry:")) == 2


async def test_a_round_robin_goes_on_where_it_stopped_with_usage_summed() -> None:
    team = make_trio()
    in_process = [answers(await team.run(t)) for t in ("one", "two", "three")]
    assert [[n for n, _ in turn] for turn in in_process] == [["a", "b"], ["c", "a"], ["b", "c"]]

    agent = make_trio().as_agent()
    thread = agent.create_thread()
    held: list[Message] = []
    plain = make_trio().as_agent()
    for task, expected in zip(("one", "two", "three"), in_process, strict=True):
        response = await agent.run(task, thread=thread)
        assert said(response.messages) == expected
        assert response.usage == Usage(2 * CALL_USAGE.input_tokens, 2 * CALL_USAGE.output_tokens)
        held.append(Message("user", task))
        answer = await plain.run(list(held), thread=LocalThread())
        assert said(answer.messages) == expected  # the same, from a plain history
        held.append(Message("assistant", as_text(answer)))


async def test_termination_counts_this_run_not_the_history_and_a_system_prompt_is_context() -> None:
    team = make_trio()
    chat = GroupChat(list(team.participants), name="chat", termination=MaxMessage(3))
    agent = chat.as_agent()
    history = [Message("system", "Be brief.")]
    speakers = []
    for i in range(4):
        history.append(Message("user", f"question {i}"))
        response = await agent.run(list(history), thread=LocalThread())
        # the user's message and two turns make three, whatever came before
        speakers.append([n for n, _ in said(response.messages)])
        history.append(Message("assistant", as_text(response)))
    assert speakers == [["a", "b"], ["c", "a"], ["b", "c"], ["a", "b"]]
    shown = team.participants[0].client.calls[0].messages  # type: ignore[attr-defined]
    assert any(m.role == "system" and m.text == "Be brief." for m in shown)


async def test_a_round_robin_is_not_waiting_for_the_user() -> None:
    response = await make_trio().as_agent().run("hello")
    assert not waits_for_user(response.messages)
    assert response.messages[-1].metadata[STATE_KEY]["carry"]["last_speaker"] == "b"


async def test_chat_options_and_instructions_reach_every_participant() -> None:
    desk = make_desk()
    agent = desk.as_agent()
    response = await agent.run(
        "Is INV-7 paid?", temperature=0.25, seed=7, instructions_override="Answer in French."
    )
    assert said(response.messages)[-1][0] == "billing"
    for participant in desk.participants:
        (call,) = participant.client.calls  # type: ignore[attr-defined]
        assert (call.options.temperature, call.options.seed) == (0.25, 7)
        assert any(m.role == "system" and m.text == "Answer in French." for m in call.messages)
    # the team's own options of a participant stay: triage is still offered its handoff
    triage = desk.participants[0].client.calls[0].options  # type: ignore[attr-defined]
    assert [t.name for t in triage.tools or ()] == ["transfer_to_billing"]
    # the next call without them runs on the agents' own settings
    again = await agent.run("And INV-8?", thread=response.thread)
    (_, later) = desk.participants[1].client.calls  # type: ignore[attr-defined]
    assert later.options.temperature is None and said(again.messages)[0][0] == "billing"


async def test_an_unknown_keyword_is_refused() -> None:
    with pytest.raises(UnknownOptionError, match="temprature"):
        await make_trio().as_agent().run("hi", temprature=0.2)


def _magentic() -> Magentic:
    def worker(name: str) -> ChatAgent:
        def answer(messages: list[Message], options: ChatOptions) -> str:
            return f"{name} did: {messages[-1].text}"

        return ChatAgent(ScriptedChatClient(answer), name=name, description=f"the {name}")

    script = ManagerScript(
        [progress("a", "read"), progress("b", satisfied=True)] * 2,
        plan=[("a", "read"), ("b", "check")],
        final="done",
    )
    return Magentic(script.client, [worker("a"), worker("b")])


async def test_magentic_keeps_its_ledger_through_a_thread_saved_as_json() -> None:
    team = _magentic()
    in_process = [answers(await team.run(t)) for t in ("first task", "second task")]

    agent = _magentic().as_agent()
    one = await agent.run("first task")
    assert one.thread is not None
    carry = one.messages[-1].metadata[STATE_KEY]["carry"]
    ledger = from_json(json.loads(json.dumps(carry["extra"])))["magentic"]["ledger"]
    assert isinstance(ledger, TaskLedger) and ledger.task == "first task"
    saved = json.dumps(await one.thread.serialize())
    other = _magentic().as_agent()
    # its manager's script is one run ahead, as the process that ran the first turn was
    warm = await other.run("first task", thread=LocalThread())
    assert said(warm.messages) == in_process[0]
    two = await other.run("second task", thread=await other.deserialize_thread(saved))
    assert [said(one.messages), said(two.messages)] == in_process
