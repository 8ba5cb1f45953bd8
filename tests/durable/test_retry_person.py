"""Needs a person: an executor's `NeedsPerson` failure stops the run with a typed request
(in events, pending requests and checkpoints); the answer runs the executor again without
repeating its journaled effects, in this process or a fresh one; a response handler may take
the answer instead. And a retry's backoff ends at once when the run is cancelled."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from cantata.core import CancellationToken, WorkflowError
from cantata.core.retry import NeedsPerson, RetryPolicy
from cantata.runtime import LocalRuntime
from cantata.workflows import (
    InMemoryCheckpointStore,
    RequestInfoEvent,
    WorkflowBuilder,
    WorkflowContext,
    executor,
    handler,
    response_handler,
)
from cantata.workflows.executor import Executor, NeedsPersonRequest


def billing(tries: list[int], paid: list[int], refusals: int, placement: str = "run") -> Any:
    """split -> charge (an effect, then NeedsPerson while refusals remain) -> total; a
    sibling `log` runs beside charge in the same superstep."""

    def pay(n: int) -> int:
        paid.append(n)
        return n * 100

    @executor
    def split(n: int, ctx: WorkflowContext[int]) -> None:
        ctx.send_message(n)

    @executor
    async def charge(n: int, ctx: WorkflowContext[int]) -> None:
        tries.append(n)
        cents = await ctx.effect("pay", pay, n)
        ctx.set_state("charged", cents)
        if len(tries) <= refusals:
            raise NeedsPerson(f"card refused for order {n}", details={"order": n})
        ctx.send_message(cents)

    @executor
    def log(n: int, ctx: WorkflowContext[None, str]) -> None:
        ctx.yield_output(f"logged {n}")

    @executor
    def total(cents: int, ctx: WorkflowContext[None, str]) -> None:
        ctx.yield_output(f"charged {cents} ({ctx.get_state('charged')})")

    return (
        WorkflowBuilder(split, placement=placement)  # type: ignore[arg-type]
        .add_fan_out_edges(split, [charge, log])
        .add_edge(charge, total)
        .build()
    )


async def test_a_needs_person_failure_becomes_a_typed_request_and_the_answer_runs_it_again() -> (
    None
):
    tries: list[int] = []
    paid: list[int] = []
    wf = billing(tries, paid, refusals=1)
    first = await wf.run(7, checkpoint_store=InMemoryCheckpointStore(), include_events=True)
    assert first.status == "idle_with_pending_requests"
    assert first.outputs == ["logged 7"]  # the sibling's work is committed
    (request,) = first.pending_requests
    assert request.executor_id == "charge" and request.response_type is str
    data = request.data
    assert isinstance(data, NeedsPersonRequest)
    assert (data.error, data.error_type, data.details) == (
        "card refused for order 7",
        "NeedsPerson",
        {"order": 7},
    )
    assert data.messages == [(7, ["split"])]
    events = [e for e in first.events if isinstance(e, RequestInfoEvent)]
    assert [e.request_id for e in events] == [request.request_id]
    second = await first.run.send_responses({request.request_id: "card updated"})
    assert second.status == "idle"
    assert second.outputs == ["logged 7", "charged 700 (700)"]
    assert tries == [7, 7] and paid == [7]  # run again; the journaled payment is not repeated


async def test_the_request_and_the_run_again_cross_a_runtime_that_moves_values() -> None:
    tries: list[int] = []
    paid: list[int] = []
    wf = billing(tries, paid, refusals=1, placement="executor")
    async with LocalRuntime(serialize_messages=True) as wire:
        store = InMemoryCheckpointStore()
        first = await wf.run(6, runtime=wire, checkpoint_store=store)
        (request,) = first.pending_requests
        assert isinstance(request.data, NeedsPersonRequest) and request.response_type is str
        done = await first.run.send_responses({request.request_id: "ok"})
    assert done.outputs == ["logged 6", "charged 600 (600)"]
    assert tries == [6, 6] and paid == [6]


async def test_asked_again_the_request_names_the_same_work() -> None:
    tries: list[int] = []
    paid: list[int] = []
    wf = billing(tries, paid, refusals=2)
    run = await wf.run(3, checkpoint_store=InMemoryCheckpointStore())
    (first,) = run.pending_requests
    again = await run.run.send_responses({first.request_id: "tried"})
    (second,) = again.pending_requests
    assert second.request_id != first.request_id
    assert second.data.messages == first.data.messages
    assert second.data.superstep == first.data.superstep
    done = await again.run.send_responses({second.request_id: "really fixed"})
    assert done.outputs == ["logged 3", "charged 300 (300)"]
    assert tries == [3, 3, 3] and paid == [3]


async def test_an_answer_of_another_type_is_refused_and_nothing_is_sent() -> None:
    wf = billing([], [], refusals=1)
    run = await wf.run(1)
    (request,) = run.pending_requests
    with pytest.raises(WorkflowError, match="must be a str"):
        await run.run.send_responses({request.request_id: 42})
    assert [r.request_id for r in run.run.pending_requests] == [request.request_id]


async def test_without_a_store_the_run_again_repeats_the_effect() -> None:
    tries: list[int] = []
    paid: list[int] = []
    wf = billing(tries, paid, refusals=1)
    run = await wf.run(2)
    (request,) = run.pending_requests
    await run.run.send_responses({request.request_id: "ok"})
    assert paid == [2, 2]  # nothing is journaled without a checkpoint store


class Approver(Executor):
    """Takes the person's answer itself: a NeedsPersonRequest response handler."""

    @handler
    async def on_order(self, n: int, ctx: WorkflowContext[None, str]) -> None:
        raise NeedsPerson(f"order {n} is over the limit")

    @response_handler
    async def on_answer(
        self, request: NeedsPersonRequest, answer: bool, ctx: WorkflowContext[None, str]
    ) -> None:
        (order, _), *_ = request.messages
        ctx.yield_output(f"order {order} {'approved' if answer else 'declined'}")


async def test_a_response_handler_for_the_request_takes_the_answer_instead() -> None:
    wf = WorkflowBuilder(Approver("approver")).build()
    run = await wf.run(9)
    (request,) = run.pending_requests
    assert request.response_type is bool
    done = await run.run.send_responses({request.request_id: False})
    assert done.outputs == ["order 9 declined"] and done.status == "idle"


async def test_a_wrapped_needs_person_is_asked_with_its_own_message() -> None:
    @executor
    def wrapper(n: int) -> None:
        try:
            raise NeedsPerson("which account?", details=["a", "b"])
        except NeedsPerson as exc:
            raise WorkflowError("the transfer could not go on") from exc

    run = await WorkflowBuilder(wrapper).build().run(1)
    (request,) = run.pending_requests
    assert (request.data.error, request.data.details) == ("which account?", ["a", "b"])


async def test_a_policy_that_retries_needs_person_retries_before_asking() -> None:
    tries: list[int] = []

    @executor
    def flaky(n: int) -> None:
        tries.append(n)
        raise NeedsPerson("still refused")

    policy = RetryPolicy(attempts=3, initial_delay=0, retry_on=frozenset({"needs_person"}))
    run = await WorkflowBuilder(flaky).with_retry(policy).build().run(4)
    assert tries == [4, 4, 4] and len(run.pending_requests) == 1


async def test_a_fatal_failure_still_fails_the_run_with_a_typed_error() -> None:
    @executor
    def broken(n: int) -> None:
        raise ValueError("amount must be positive")

    wf = WorkflowBuilder(broken).with_retry(RetryPolicy(attempts=3, initial_delay=0)).build()
    with pytest.raises(WorkflowError, match="amount must be positive") as info:
        await wf.run(-1)
    assert getattr(info.value, "executor_id", None) == "broken"


async def test_cancelling_the_run_ends_a_retry_s_backoff_at_once() -> None:
    tries: list[int] = []

    @executor
    def down(n: int) -> None:
        tries.append(n)
        raise ConnectionResetError("reset")

    policy = RetryPolicy(attempts=5, initial_delay=600, max_delay=600, jitter=0)
    wf = WorkflowBuilder(down).with_retry(policy).build()
    token = CancellationToken()
    task = asyncio.ensure_future(wf.run(1, cancellation_token=token))
    for _ in range(200):
        if tries:
            break
        await asyncio.sleep(0.01)
    token.cancel()
    result = await asyncio.wait_for(task, 10)  # the backoff alone would wait 600 s
    assert result.status == "cancelled" and tries == [1]


_CHILD = textwrap.dedent(
    """
    import asyncio, json, sys
    from pathlib import Path
    from cantata.core.retry import NeedsPerson
    from cantata.stores import SQLiteStore
    from cantata.workflows import StateStoreCheckpointStore, WorkflowBuilder, WorkflowContext
    from cantata.workflows import executor

    db, ledger, mode = sys.argv[1], Path(sys.argv[2]), sys.argv[3]

    def pay(n: int, *, idempotency_key: str) -> str:
        with ledger.open("a") as f:
            f.write(idempotency_key + "\\n")
        return f"receipt-{n}"

    @executor
    async def charge(n: int, ctx: WorkflowContext[None, str]) -> None:
        receipt = await ctx.effect("pay", pay, n)
        if mode == "start":
            raise NeedsPerson("card refused", details={"order": n})
        ctx.yield_output(receipt)

    async def main() -> None:
        store = StateStoreCheckpointStore(SQLiteStore(db))
        wf = WorkflowBuilder(charge).build()
        try:
            if mode == "start":
                result = await wf.run(5, checkpoint_store=store, run_id="run-p")
                (request,) = result.pending_requests
                out = {"checkpoint": result.run.checkpoint_id, "request": request.request_id,
                       "error": request.data.error, "details": request.data.details}
            else:
                checkpoint, request_id = sys.argv[4], sys.argv[5]
                result = await wf.resume(checkpoint, checkpoint_store=store,
                                         responses={request_id: "card updated"})
                out = {"outputs": result.outputs, "status": result.status}
        finally:
            await store.close()
        print(json.dumps(out))

    asyncio.run(main())
    """
)


def _child(script: Path, *args: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, str(script), *args], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    parsed: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return parsed


def test_the_request_survives_a_checkpoint_and_is_answered_in_a_fresh_process(
    tmp_path: Path,
) -> None:
    script = tmp_path / "child.py"
    script.write_text(_CHILD)
    db, ledger = str(tmp_path / "run.db"), tmp_path / "ledger.txt"
    started = _child(script, db, str(ledger), "start")
    assert (started["error"], started["details"]) == ("card refused", {"order": 5})
    answered = _child(script, db, str(ledger), "answer", started["checkpoint"], started["request"])
    assert answered == {"outputs": ["receipt-5"], "status": "idle"}
    assert ledger.read_text().splitlines() == ["run-p:charge:1:pay"]  # paid once, in all


async def test_a_workflow_used_as_an_agent_asks_with_a_function_call_and_goes_on() -> None:
    from cantata.core import FunctionResultContent, Message
    from cantata.workflows import REQUEST_INFO

    refusals = [True]

    @executor
    def pay(text: str, ctx: WorkflowContext[None, str]) -> None:
        if refusals and refusals.pop():
            raise NeedsPerson("the card was refused", details={"what": text})
        ctx.yield_output(f"paid for {text}")

    agent = WorkflowBuilder(pay).build().as_agent(name="payer")
    thread = agent.create_thread()
    first = await agent.run("tea", thread=thread)
    [call] = first.messages[-1].function_calls
    assert call.name == REQUEST_INFO
    data = call.parse_arguments()["data"]
    assert data["error"] == "the card was refused" and data["details"] == {"what": "tea"}
    answer = Message("tool", [FunctionResultContent(call.call_id, result="card updated")])
    second = await agent.run(answer, thread=thread)
    assert second.text == "paid for tea"
