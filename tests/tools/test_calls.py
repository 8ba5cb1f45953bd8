"""Running one turn of calls: outcomes, approval, and how cancellation gets out."""

from __future__ import annotations

import asyncio

import pytest

from cantata.core import CancellationToken, CancelledError, FunctionResultContent
from cantata.models import tool_call
from cantata.tools import FunctionTool, tool
from cantata.tools._calls import CallRunner


def hanging() -> tuple[FunctionTool, asyncio.Event]:
    """A tool that waits until cancelled, and an event set when it started."""
    entered = asyncio.Event()

    @tool
    async def hang() -> None:
        """Waits until cancelled."""
        entered.set()
        await asyncio.Event().wait()

    return hang, entered


@tool(approval_mode="always_require")
def guarded() -> str:
    """Needs approval."""
    return "ran"


def runner(token: CancellationToken, *tools: FunctionTool, concurrent: bool = True) -> CallRunner:
    return CallRunner(
        {t.name: t for t in (guarded, *tools)}, (), kwargs={}, token=token, concurrent=concurrent
    )


async def test_a_call_needing_approval_has_no_result_until_approved() -> None:
    token = CancellationToken()
    [waiting] = await runner(token).run_turn([tool_call("guarded", call_id="g")])
    assert waiting.needs_approval and not waiting.failed
    [done] = await runner(token).run_turn([tool_call("guarded", call_id="g")], approved=True)
    assert done.result == FunctionResultContent("g", "ran")


async def test_an_unknown_call_is_a_failed_outcome() -> None:
    [outcome] = await runner(CancellationToken()).run_turn([tool_call("nope")])
    assert outcome.failed and not outcome.needs_approval


@pytest.mark.parametrize("concurrent", [True, False])
async def test_token_cancellation_surfaces_as_cantata_cancelled_error(concurrent: bool) -> None:
    hang, entered = hanging()
    token = CancellationToken()
    turn = asyncio.ensure_future(
        runner(token, hang, concurrent=concurrent).run_turn([tool_call("hang"), tool_call("hang")])
    )
    await entered.wait()
    token.cancel()
    with pytest.raises(CancelledError, match="CancellationToken"):
        await turn


async def test_cancelling_the_caller_task_stays_an_asyncio_cancellation() -> None:
    hang, entered = hanging()
    token = CancellationToken()
    turn = asyncio.ensure_future(runner(token, hang).run_turn([tool_call("hang")]))
    await entered.wait()
    turn.cancel()
    with pytest.raises(asyncio.CancelledError):
        await turn
    assert not token.is_cancelled


async def test_an_already_cancelled_token_runs_nothing() -> None:
    token = CancellationToken()
    token.cancel()
    with pytest.raises(CancelledError):
        await runner(token).run_turn([tool_call("guarded")], approved=True)
