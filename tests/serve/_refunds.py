"""What the approval tests serve in a `cantata serve` subprocess: a support agent whose
``refund`` tool needs a person's approval, a team around it, and a workflow that asks a
person before it pays out. Every side effect is a line appended to the file named by
``REFUND_LOG`` (when set), so a test counts how often, and in which process, it happened.

The models are functions of the conversation, so any process (a restarted one too) answers
as the first would have."""

from __future__ import annotations

import os
from pathlib import Path

from cantata.agents import ChatAgent
from cantata.core import Message
from cantata.models import ChatOptions, ScriptedChatClient, ScriptedTurn, tool_call
from cantata.tools import tool


def _record(what: str) -> None:
    log = os.environ.get("REFUND_LOG")
    if log:
        with Path(log).open("a", encoding="utf-8") as f:
            f.write(f"{os.getpid()} {what}\n")


@tool(approval_mode="always_require")
def refund(order: int) -> str:
    """Refund an order."""
    _record(f"refund {order}")
    return f"refunded order {order}"


def _support(messages: list[Message], options: ChatOptions) -> ScriptedTurn:
    last = messages[-1]
    if last.role == "tool":
        result = last.function_results[0]
        return f"Done: {result.result}" if result.error is None else f"Not done: {result.error}"
    return [tool_call("refund", {"order": 1001})]


def make_support() -> ChatAgent:
    return ChatAgent(
        ScriptedChatClient(_support), name="support", description="refunds", tools=[refund]
    )


support = make_support()
