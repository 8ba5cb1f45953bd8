"""ToolContext: safe defaults, immutable, and what the loop puts in it."""

from __future__ import annotations

import dataclasses

import pytest

from cantata.core import CancellationToken, Message
from cantata.models import ScriptedChatClient, tool_call
from cantata.tools import FunctionInvokingChatClient, ToolContext, tool


def test_defaults_are_empty_and_each_context_has_its_own_token() -> None:
    first, second = ToolContext(), ToolContext()
    assert dict(first.kwargs) == {}
    assert first.call_id is None and first.tool_name is None and not first.approved
    assert first.cancellation_token is not second.cancellation_token


def test_a_context_cannot_be_changed_by_a_tool() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        ToolContext().call_id = "forged"  # type: ignore[misc]


async def test_the_loop_hands_tools_the_runs_token() -> None:
    token = CancellationToken()
    seen: list[ToolContext] = []

    @tool
    def probe(ctx: ToolContext) -> str:
        """Record the context."""
        seen.append(ctx)
        return "ok"

    client = FunctionInvokingChatClient(
        ScriptedChatClient([[tool_call("probe", call_id="p1")], "done"]), tools=[probe]
    )
    await client.get_response([Message("user", "x")], cancellation_token=token)
    [ctx] = seen
    assert ctx.cancellation_token is token
    assert (ctx.call_id, ctx.tool_name, ctx.approved) == ("p1", "probe", False)
