"""What the stored-session tests serve in a `cantata serve` subprocess: a round-robin team
whose payer calls ``pay`` (a tool that needs a person's approval) and a checker that reads
what the payer said. Each payment is appended to the file named by ``PAY_LOG`` (when set),
so a test sees in which process, and how often, the tool ran.

The models are functions of the conversation, so a restarted process answers as the first
would have."""

from __future__ import annotations

import os
from pathlib import Path

from cantata.agents import ChatAgent
from cantata.core import Message
from cantata.models import ChatOptions, ScriptedChatClient, ScriptedTurn, tool_call
from cantata.teams import GroupChat
from cantata.tools import tool


@tool(name="pay", approval_mode="always_require")
def pay(amount: int) -> str:
    """Pay an amount."""
    log = os.environ.get("PAY_LOG")
    if log:
        with Path(log).open("a", encoding="utf-8") as f:
            f.write(f"{os.getpid()} {amount}\n")
    return f"paid {amount}"


def _payer(messages: list[Message], options: ChatOptions) -> ScriptedTurn:
    last = messages[-1]
    if last.role == "tool":
        said = "; ".join(
            str(r.error if r.error is not None else r.result) for r in last.function_results
        )
        return f"payer says {said}"
    return [tool_call("pay", {"amount": 5})]


def _checker(messages: list[Message], options: ChatOptions) -> str:
    return f"checker saw: {messages[-1].text}"


def make_team() -> GroupChat:
    payer = ChatAgent(ScriptedChatClient(_payer), name="payer", description="pays", tools=[pay])
    checker = ChatAgent(ScriptedChatClient(_checker), name="checker", description="checks")
    return GroupChat([payer, checker], name="payers", max_turns=2)


team = make_team()


def _pid(messages: list[Message], options: ChatOptions) -> str:
    return str(os.getpid())


both = {
    "payers": team,
    "pid": ChatAgent(ScriptedChatClient(_pid), name="pid", description="says its process id"),
}
"""The team, and an agent that answers with the id of the process that ran it."""
