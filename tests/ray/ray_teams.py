"""Teams the Ray team tests run on every runtime, on scripted models.

A top-level module of this folder (on the path of the driver and of every Ray worker), so
the agents' script functions pickle by reference. Each builder makes a new team (a new
definition: its own workflow, so its own actors on Ray); scripts are deterministic, so
every runtime must produce the same transcript.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Sequence
from typing import Any

from cantata.agents import ChatAgent
from cantata.core import Message
from cantata.models import ChatOptions, ScriptedChatClient, tool_call
from cantata.teams import (
    ChatState,
    Concurrent,
    GroupChat,
    Handoff,
    Magentic,
    MaxMessage,
    Selector,
    Sequential,
    Team,
    TextMention,
)

# -- participants ----------------------------------------------------------------------------


class Counter:
    """Answers ``"<name> says <n>"``, n the number of messages it was shown (so a channel
    that missed or doubled a message changes the transcript); APPROVE from `approve_after`."""

    def __init__(self, name: str, approve_after: int | None = None) -> None:
        self.name, self.approve_after = name, approve_after

    def __call__(self, messages: list[Message], options: ChatOptions) -> str:
        text = f"{self.name} says {len(messages)}"
        if self.approve_after is not None and len(messages) >= self.approve_after:
            text += " APPROVE"
        return text


def counter(name: str, approve_after: int | None = None) -> ChatAgent:
    client = ScriptedChatClient(Counter(name, approve_after))
    return ChatAgent(client, name=name, description=f"the {name}")


def scripted(name: str, script: list[Any]) -> ChatAgent:
    return ChatAgent(ScriptedChatClient(script), name=name, description=f"the {name}")


class Waiter:
    """Answers once a marker file exists (polled; the run's cancellation interrupts it)."""

    def __init__(self, name: str, marker: str) -> None:
        self.name, self.marker = name, marker

    async def __call__(self, messages: list[Message], options: ChatOptions) -> str:
        for _ in range(1200):  # at most 60 s
            if os.path.exists(self.marker):  # noqa: ASYNC240 (a test's flag)
                return f"{self.name} says {len(messages)}"
            await asyncio.sleep(0.05)
        raise TimeoutError(f"marker {self.marker} never appeared")


class CrashOnce:
    """Ends its worker process at its first answer (no marker file yet: it leaves one), then
    answers as a `Counter` would: a participant whose actor dies mid-turn."""

    def __init__(self, name: str, marker: str) -> None:
        self.name, self.marker = name, marker

    def __call__(self, messages: list[Message], options: ChatOptions) -> str:
        if not os.path.exists(self.marker):
            open(self.marker, "w").close()
            os._exit(1)
        return f"{self.name} says {len(messages)}"


# -- teams -----------------------------------------------------------------------------------


def round_robin() -> Team:
    """Three turns of talk, then the writer approves (a termination condition)."""
    agents = [counter("writer", approve_after=5), counter("critic")]
    return GroupChat(agents, termination=TextMention("APPROVE"), name="rr")


def _pick(state: ChatState) -> str:
    """A function speaker: a, b, b, a, b, b, ... (a speaker may go twice in a row)."""
    return ["a", "b", "b"][state.turn % 3]


def selector() -> Team:
    agents = [counter("a"), counter("b"), counter("c")]
    return GroupChat(agents, speaker=Selector(ScriptedChatClient(_select)), max_turns=4)


def _select(messages: list[Message], options: ChatOptions) -> str:
    """A selector model that reads the conversation: the next is whoever has spoken least."""
    said = " ".join(m.text for m in messages)
    counts = {n: said.count(f"{n} says") for n in ("c", "b", "a")}
    return min(counts, key=lambda n: counts[n])


class LastTwo:
    """A history reducer: the channels mirror only the last two messages."""

    async def reduce(self, messages: Sequence[Message]) -> list[Message]:
        return list(messages[-2:])


def reduced() -> Team:
    """A round robin whose channels are reset to the reduced history after every turn."""
    return GroupChat(
        [counter("a"), counter("b")], max_turns=5, history_reducer=LastTwo(), name="reduced"
    )


def function_speaker() -> Team:
    agents = [counter("a"), counter("b")]
    return GroupChat(agents, speaker=_pick, max_turns=5, name="fn")


def sequential() -> Team:
    return Sequential([counter("draft"), counter("edit")])


def _join(answers: list[Any]) -> str:
    return " | ".join(f"{a.name}: {a.text}" for a in answers)


def concurrent() -> Team:
    return Concurrent([counter("legal"), counter("finance")], aggregator=_join)


def handoff() -> Team:
    """Triage hands over to billing, which answers and asks the user; the user's reply goes
    back to billing, which hands the conversation back to triage."""
    triage = scripted(
        "triage",
        [[tool_call("transfer_to_billing", {"summary": "refund for order 7"})], "anything else?"],
    )
    billing = scripted("billing", ["refund issued", [tool_call("transfer_to_triage", {})]])
    return Handoff([triage, billing], termination=MaxMessage(12))


def _progress(speaker: str, satisfied: bool = False) -> str:
    def judged(answer: Any) -> dict[str, Any]:
        return {"reason": f"because {answer}", "answer": answer}

    return json.dumps(
        {
            "is_request_satisfied": judged(satisfied),
            "is_in_loop": judged(False),
            "is_progress_being_made": judged(True),
            "next_speaker": judged(speaker),
            "instruction_or_question": judged(f"{speaker}, go on"),
        }
    )


class ManagerModel:
    """The magentic manager's model: facts, a plan, ledgers in order, a final answer."""

    def __init__(self, ledgers: list[str]) -> None:
        self.ledgers = list(ledgers)

    def __call__(self, messages: list[Message], options: ChatOptions) -> str:
        name = getattr(options.response_format, "__name__", "")
        if name == "_Facts":
            return json.dumps({"facts": ["f1"]})
        if name == "PlanOut":
            return json.dumps({"steps": [{"agent": "a", "action": "research"}]})
        if name == "ProgressLedgerOut":
            return self.ledgers.pop(0)
        if name == "_Final":
            return json.dumps({"answer": "the final answer"})
        raise AssertionError(f"unexpected request format {name!r}")


def magentic() -> Team:
    ledgers = [_progress("a"), _progress("b"), _progress("a"), _progress("a", satisfied=True)]
    model = ScriptedChatClient(ManagerModel(ledgers))
    return Magentic(model, [counter("a"), counter("b")])


def waiting(marker: str) -> Team:
    """A round robin whose second speaker waits for `marker` (to be cancelled meanwhile)."""
    slow = ChatAgent(ScriptedChatClient(Waiter("slow", marker)), name="slow")
    return GroupChat([counter("quick"), slow], max_turns=4, name="waiting")


def crashing(marker: str) -> Team:
    """A round robin whose third speaker's worker dies at its first turn."""
    crashy = ChatAgent(ScriptedChatClient(CrashOnce("crashy", marker)), name="crashy")
    return GroupChat([counter("a"), counter("b"), crashy], max_turns=5, name="crashing")


BUILDERS = {
    "round_robin": round_robin,
    "selector": selector,
    "function_speaker": function_speaker,
    "reduced": reduced,
    "sequential": sequential,
    "concurrent": concurrent,
    "handoff": handoff,
    "magentic": magentic,
}
