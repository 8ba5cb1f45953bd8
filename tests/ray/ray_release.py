"""What the Ray release tests run: a probe agent that counts, in the host process it lives
in, the objects a finished run could have left behind, and teams whose sessions end in
each way (done, failed, waiting for a person). A top-level module of this folder (on the
path of the driver and of every Ray worker), so everything pickles by reference."""

from __future__ import annotations

import gc
from typing import Any

from cantata.agents import ChatAgent
from cantata.core import Message
from cantata.models import ChatOptions, ScriptedChatClient, ScriptedTurn, tool_call
from cantata.runtime import BaseAgent, MessageContext
from cantata.teams import GroupChat, Team
from cantata.tools import tool

LEFT_BEHIND = ("ExecutorActor", "RunActor", "Invocation", "ExecutorTask", "Cell")
"""Type names of what a run's actors are made of, in a host."""


class Probe(BaseAgent):
    """Answers with how many objects of each `LEFT_BEHIND` type live in its process (after
    a collection): the weak-reference check of a host, from the driver."""

    async def on_message(self, message: Any, ctx: MessageContext) -> dict[str, int]:
        gc.collect()
        counts = dict.fromkeys(LEFT_BEHIND, 0)
        for found in gc.get_objects():
            name = type(found).__name__
            if name in counts:
                counts[name] += 1
        return counts


def _say(name: str) -> Any:
    def say(messages: list[Message], options: ChatOptions) -> str:
        if "fail" in messages[0].text:
            raise RuntimeError("the model failed")
        return f"{name} says {len(messages)}"

    return say


@tool(name="pay", approval_mode="always_require")
def pay(amount: int) -> str:
    """Pay an amount."""
    return f"paid {amount}"


def _pay_or_talk(messages: list[Message], options: ChatOptions) -> ScriptedTurn:
    if messages[-1].role == "tool" or any(m.function_results for m in messages):
        return "payer is done"
    if "pay" not in messages[0].text:
        return "payer has nothing to pay"
    return [tool_call("pay", {"amount": 5})]


def team() -> Team:
    """Two participants: a payer whose tool needs approval, when asked to pay, and a
    checker whose model fails when the task says so."""
    payer = ChatAgent(ScriptedChatClient(_pay_or_talk), name="payer", tools=[pay])
    checker = ChatAgent(ScriptedChatClient(_say("checker")), name="checker")
    return GroupChat([payer, checker], max_turns=2, name="release")
