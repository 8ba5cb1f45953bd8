"""Human in the loop: typed requests, idle with pending requests, answers by id."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from cantata.core import WorkflowError, register
from cantata.workflows import (
    Executor,
    RequestInfoEvent,
    WorkflowBuilder,
    WorkflowContext,
    handler,
    response_handler,
)


@register(name="tests.workflows.Approval")
@dataclass
class Approval:
    question: str


class Gate(Executor):
    @handler
    async def ask(self, amount: int, ctx: WorkflowContext[None, str]) -> None:
        ctx.set_executor_state({"amount": amount})
        await ctx.request_info(Approval(f"pay {amount}?"))

    @response_handler
    async def answered(
        self, request: Approval, answer: bool, ctx: WorkflowContext[None, str]
    ) -> None:
        amount = ctx.get_executor_state()["amount"]
        await ctx.yield_output(f"{request.question} {'yes' if answer else 'no'} ({amount})")


async def test_round_trip_in_process() -> None:
    wf = WorkflowBuilder(Gate("gate")).build()
    result = await wf.run(40, include_events=True)
    assert result.status == "idle_with_pending_requests"
    [request] = result.pending_requests
    assert isinstance(request, RequestInfoEvent)
    assert request.data == Approval("pay 40?") and request.response_type is bool
    assert any(isinstance(e, RequestInfoEvent) for e in result.events)
    done = await result.send_responses({request.request_id: True})
    assert done.status == "idle"
    assert done.outputs == ["pay 40? yes (40)"]
    assert done.pending_requests == []


async def test_wrong_answer_type_is_refused_and_the_run_still_waits() -> None:
    result = await WorkflowBuilder(Gate("gate")).build().run(1)
    [request] = result.pending_requests
    with pytest.raises(WorkflowError, match="must be a bool, not a str; nothing was sent"):
        await result.send_responses({request.request_id: "yes"})
    assert [r.request_id for r in result.run.pending_requests] == [request.request_id]
    assert (await result.send_responses({request.request_id: False})).outputs == ["pay 1? no (1)"]


async def test_unknown_request_id_is_refused() -> None:
    result = await WorkflowBuilder(Gate("gate")).build().run(1)
    with pytest.raises(WorkflowError, match="no pending request 'nope'"):
        await result.send_responses({"nope": True})


async def test_request_without_a_response_handler_fails_clearly() -> None:
    class Asker(Executor):
        @handler
        async def ask(self, amount: int, ctx: WorkflowContext) -> None:
            await ctx.request_info(Approval("?"))

    with pytest.raises(WorkflowError, match="no @response_handler"):
        await WorkflowBuilder(Asker("asker")).build().run(1)


async def test_streamed_continuation() -> None:
    result = await WorkflowBuilder(Gate("gate")).build().run(2)
    [request] = result.pending_requests
    stream = result.send_responses_stream({request.request_id: True})
    events = [e async for e in stream]
    assert stream.result.outputs == ["pay 2? yes (2)"]
    assert events


class Flaky(Executor):
    """Its response handler fails on the first answer it gets (a model that timed out)."""

    def __init__(self) -> None:
        super().__init__("flaky")
        self.calls = 0

    @handler
    async def ask(self, amount: int, ctx: WorkflowContext[None, str]) -> None:
        await ctx.request_info(Approval(f"pay {amount}?"))

    @response_handler
    async def answered(
        self, request: Approval, answer: bool, ctx: WorkflowContext[None, str]
    ) -> None:
        self.calls += 1
        if self.calls == 1:
            raise ConnectionError("model unavailable")
        await ctx.yield_output(f"{request.question} {answer}")


async def test_an_answer_whose_handler_fails_can_be_given_again() -> None:
    result = await WorkflowBuilder(Flaky()).build().run(7)
    [request] = result.pending_requests
    with pytest.raises(WorkflowError, match="executor 'flaky' failed: ConnectionError"):
        await result.send_responses({request.request_id: True})
    run = result.run
    assert run.status == "failed"
    assert [r.request_id for r in run.pending_requests] == [request.request_id]
    done = await run.send_responses({request.request_id: True})
    assert done.status == "idle" and done.outputs == ["pay 7? True"]


async def test_answering_twice_is_refused_and_answering_while_driven_changes_nothing() -> None:
    import asyncio

    result = await WorkflowBuilder(Gate("gate")).build().run(2)
    [request] = result.pending_requests
    await result.send_responses({request.request_id: True})
    with pytest.raises(WorkflowError, match=f"no pending request '{request.request_id}'"):
        await result.send_responses({request.request_id: False})

    started, release = asyncio.Event(), asyncio.Event()

    class Slow(Executor):
        @handler
        async def ask(self, amount: int, ctx: WorkflowContext[None, str]) -> None:
            ctx.request_info(Approval("first"))
            ctx.request_info(Approval("second"))

        @response_handler
        async def answered(
            self, request: Approval, answer: bool, ctx: WorkflowContext[None, str]
        ) -> None:
            started.set()
            await release.wait()
            await ctx.yield_output(request.question)

    waiting = await WorkflowBuilder(Slow("slow")).build().run(1)
    first, second = waiting.pending_requests
    driving = asyncio.ensure_future(waiting.send_responses({first.request_id: True}))
    await started.wait()
    with pytest.raises(WorkflowError, match="already being driven"):
        await waiting.send_responses({second.request_id: True})
    release.set()
    done = await driving
    assert done.outputs == ["first"]  # the refused call's answer was not taken
    assert [r.request_id for r in done.pending_requests] == [second.request_id]
