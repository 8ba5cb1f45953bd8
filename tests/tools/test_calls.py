"""Running one turn of calls: outcomes, approval, and how cancellation gets out."""

from __future__ import annotations

import asyncio

import pytest

from cantata.core import CancellationToken, CancelledError, FunctionResultContent, Message
from cantata.models import ScriptedChatClient, tool_call
from cantata.tools import FunctionInvokingChatClient, FunctionTool, tool
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


class Abort(BaseException):
    """Not an Exception: must never become an error result."""


@pytest.mark.parametrize("kind", [KeyboardInterrupt, Abort])
@pytest.mark.parametrize("sync", [True, False])
def test_base_exceptions_from_a_tool_escape_the_run(kind: type[BaseException], sync: bool) -> None:
    # a fresh event loop: a KeyboardInterrupt leaves the loop it is raised in
    def raise_it() -> None:
        raise kind()

    async def raise_it_async() -> None:
        raise kind()

    stop = FunctionTool("stop", func=raise_it if sync else raise_it_async)
    client = FunctionInvokingChatClient(
        ScriptedChatClient([[tool_call("stop")], "never"]), tools=[stop]
    )
    with pytest.raises(kind):
        asyncio.run(client.get_response([Message("user", "x")]))


async def test_asyncio_cancellation_raised_inside_a_tool_is_not_an_error_result() -> None:
    @tool
    async def cancelled_inside() -> None:
        """Awaits something that was cancelled."""
        raise asyncio.CancelledError

    client = FunctionInvokingChatClient(
        ScriptedChatClient([[tool_call("cancelled_inside")], "never"]), tools=[cancelled_inside]
    )
    with pytest.raises(asyncio.CancelledError):
        await client.get_response([Message("user", "x")])


async def test_an_exception_from_a_sync_tool_in_its_thread_is_an_error_result() -> None:
    @tool
    def broken(n: int) -> float:
        """Divides by zero in a worker thread."""
        return n / 0

    [outcome] = await CallRunner(
        {"broken": broken}, (), kwargs={}, token=CancellationToken(), concurrent=True
    ).run_turn([tool_call("broken", {"n": 1}, call_id="b")])
    assert outcome.result == FunctionResultContent(
        "b", error="tool 'broken' failed: ZeroDivisionError: division by zero"
    )
