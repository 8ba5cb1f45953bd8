"""What the approval tests serve in a `cantata serve` subprocess: a support agent whose
``refund`` tool needs a person's approval, a team around it, and a workflow that asks a
person before it pays out. Every side effect is a line appended to the file named by
``REFUND_LOG`` (when set), so a test counts how often, and in which process, it happened.

The models are functions of the conversation, so any process (a restarted one too) answers
as the first would have."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from cantata.agents import ChatAgent
from cantata.core import Message
from cantata.models import ChatOptions, ScriptedChatClient, ScriptedTurn, tool_call
from cantata.teams import GroupChat
from cantata.tools import tool
from cantata.workflows import (
    Executor,
    Workflow,
    WorkflowBuilder,
    WorkflowContext,
    handler,
    response_handler,
)


def _record(what: str) -> None:
    log = os.environ.get("REFUND_LOG")
    if log:
        with Path(log).open("a", encoding="utf-8") as f:
            f.write(f"{os.getpid()} {what}\n")


@tool(approval_mode="always_require")
async def refund(order: int) -> str:
    """Refund an order (taking ``REFUND_SECONDS``, when set, so that runs overlap)."""
    await asyncio.sleep(float(os.environ.get("REFUND_SECONDS", "0")))
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


def _checker(messages: list[Message], options: ChatOptions) -> str:
    return f"checker saw: {messages[-1].text}"


def make_team() -> GroupChat:
    checker = ChatAgent(ScriptedChatClient(_checker), name="checker", description="checks")
    return GroupChat([make_support(), checker], name="desk", max_turns=2)


class _Payout(Executor):
    """Asks a person before it pays out; the payout is the side effect."""

    @handler
    async def start(self, text: str, ctx: WorkflowContext[None, str]) -> None:
        await ctx.request_info(f"pay out for {text}?", response_type=str)

    @response_handler
    async def got(self, request: str, answer: str, ctx: WorkflowContext[None, str]) -> None:
        if answer.strip().lower() == "yes":
            _record("payout")
            await ctx.yield_output("paid out")
        else:
            await ctx.yield_output("not paid")


def make_workflow() -> Workflow:
    return WorkflowBuilder(_Payout("payout"), name="payout").build()


served = {"support": support, "desk": make_team(), "payout": make_workflow()}
"""A lone agent, a team and a workflow, each waiting for a person before its side effect."""
