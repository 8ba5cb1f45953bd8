"""Tool retries: ``@tool(retry_policy=...)`` calls a failing function again on retryable
errors only, validates arguments once, stops its backoff at once on cancellation; an effect
tool inside a durable run keeps one journal entry and one idempotency key for all attempts.
A tool that needs a person ends the agent's run with that error (in a workflow: a request
whose answer calls the tool again)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cantata.agents import ChatAgent
from cantata.core import (
    CancellationToken,
    CancelledError,
    ConfigurationError,
    FunctionResultContent,
    Message,
)
from cantata.core.retry import NeedsPerson, RetryPolicy
from cantata.models import ScriptedChatClient, tool_call
from cantata.stores import MemoryStore
from cantata.tools import FunctionTool, ToolArgumentsError, ToolContext, tool
from cantata.workflows import (
    AgentExecutor,
    EffectJournal,
    StateStoreCheckpointStore,
    WorkflowBuilder,
)

QUICK = RetryPolicy(attempts=3, initial_delay=0)


def flaky(failures: list[BaseException], calls: list[int]) -> FunctionTool:
    @tool(retry_policy=QUICK)
    def fetch(n: int) -> int:
        """Fetch a number from a service that sometimes fails."""
        calls.append(n)
        if failures:
            raise failures.pop(0)
        return n * 2

    return fetch


async def test_a_retryable_failure_calls_the_function_again() -> None:
    calls: list[int] = []
    fetch = flaky([ConnectionResetError("reset"), TimeoutError("slow")], calls)
    assert fetch.retry_policy is QUICK
    assert await fetch.invoke({"n": 4}) == 8
    assert calls == [4, 4, 4]


async def test_a_fatal_failure_is_raised_at_once() -> None:
    calls: list[int] = []
    fetch = flaky([ValueError("no such number")], calls)
    with pytest.raises(ValueError, match="no such number"):
        await fetch.invoke({"n": 4})
    assert calls == [4]


async def test_the_last_failure_is_raised_after_the_policy_s_attempts() -> None:
    calls: list[int] = []
    fetch = flaky([ConnectionResetError(f"reset {i}") for i in range(5)], calls)
    with pytest.raises(ConnectionResetError, match="reset 2"):
        await fetch.invoke({"n": 1})
    assert calls == [1, 1, 1]


async def test_bad_arguments_are_not_retried() -> None:
    calls: list[int] = []
    fetch = flaky([], calls)
    with pytest.raises(ToolArgumentsError):
        await fetch.invoke({"n": "four"})
    assert calls == []


async def test_cancellation_ends_the_backoff_at_once() -> None:
    calls: list[int] = []

    @tool(retry_policy=RetryPolicy(attempts=4, initial_delay=600, max_delay=600, jitter=0))
    async def down(n: int, context: ToolContext) -> int:
        """Always down."""
        calls.append(n)
        raise ConnectionResetError("reset")

    token = CancellationToken()
    task = asyncio.ensure_future(
        down.invoke({"n": 1}, context=ToolContext(cancellation_token=token))
    )
    for _ in range(200):
        if calls:
            break
        await asyncio.sleep(0.01)
    token.cancel()
    with pytest.raises(CancelledError):
        await asyncio.wait_for(task, 10)  # the backoff alone would wait 600 s
    assert calls == [1]


class Weather:
    """A plugin whose tool method retries."""

    def __init__(self) -> None:
        self.calls = 0

    @tool(retry_policy=QUICK)
    def forecast(self, city: str) -> str:
        """The forecast of a city."""
        self.calls += 1
        if self.calls == 1:
            raise ConnectionResetError("reset")
        return f"sun in {city}"


async def test_a_tool_method_bound_to_its_instance_keeps_the_policy() -> None:
    plugin = Weather()
    bound = plugin.forecast
    assert bound.retry_policy is QUICK
    assert await bound.invoke({"city": "Oslo"}) == "sun in Oslo" and plugin.calls == 2


@given(st.one_of(st.integers(), st.text(), st.dictionaries(st.text(), st.integers())))
def test_a_retry_policy_that_is_no_policy_is_refused(bad: Any) -> None:
    with pytest.raises(ConfigurationError, match="retry_policy"):
        tool(name="double", retry_policy=bad)(lambda n: n)


def charging(cents: int) -> Callable[[list[Message], Any], Any]:
    """A model that calls `charge` for `cents`, then answers with the call's result."""

    def answer(messages: list[Message], options: Any) -> Any:
        results = [c for m in messages for c in m.contents if isinstance(c, FunctionResultContent)]
        if not results:
            return Message("assistant", [tool_call("charge", {"cents": cents})])
        return f"done: {results[0].result}"

    return answer


async def test_an_effect_tool_retried_in_a_durable_run_is_journaled_once_with_one_key() -> None:
    keys: list[str | None] = []
    charged: list[int] = []

    @tool(effect=True, retry_policy=QUICK)
    def charge(cents: int, context: ToolContext) -> str:
        """Charge the card."""
        keys.append(context.idempotency_key)
        if len(keys) == 1:
            raise ConnectionResetError("the payment service dropped the connection")
        charged.append(cents)
        return f"receipt-{len(charged)}"

    agent = ChatAgent(ScriptedChatClient(charging(500)), name="biller", tools=[charge])
    wf = WorkflowBuilder(AgentExecutor(agent)).build()
    store = StateStoreCheckpointStore(MemoryStore())
    result = await wf.run("charge 5 dollars", checkpoint_store=store, run_id="run-t")
    assert [str(o) for o in result.outputs] == ["done: receipt-1"]
    assert charged == [500] and len(keys) == 2 and keys[0] == keys[1]
    assert keys[0] is not None and keys[0].startswith("run-t:biller:1:tool:")
    journaled = await EffectJournal(store.store).keys("run-t")
    assert [k for k in journaled if ":tool:" in k] == [keys[0]]
    assert await EffectJournal(store.store).lookup(keys[0]) == (True, "receipt-1")


async def test_outside_a_durable_run_an_effect_tool_gets_no_key() -> None:
    seen: list[str | None] = []

    @tool(effect=True)
    def charge(cents: int, context: ToolContext) -> str:
        """Charge the card."""
        seen.append(context.idempotency_key)
        return "ok"

    assert await charge.invoke({"cents": 1}, context=ToolContext()) == "ok" and seen == [None]


def refusing_agent(refusals: list[bool], charged: list[int]) -> tuple[ChatAgent, Any]:
    @tool
    def charge(cents: int) -> str:
        """Charge the card."""
        if refusals and refusals.pop(0):
            raise NeedsPerson("the card was refused; update it", details={"cents": cents})
        charged.append(cents)
        return f"receipt-{len(charged)}"

    client = ScriptedChatClient(charging(300))
    return ChatAgent(client, name="biller", tools=[charge]), client


async def test_a_tool_that_needs_a_person_ends_the_agent_s_run_with_that_error() -> None:
    agent, _ = refusing_agent([True], [])
    thread = agent.create_thread()
    with pytest.raises(NeedsPerson, match="card was refused"):
        await agent.run("charge 3 dollars", thread=thread)
    # the call never got a result: the thread holds no call without one
    assert [m.role for m in await thread.get_messages()] == ["user"]


async def test_in_a_workflow_it_becomes_a_request_and_the_answer_calls_the_tool_again() -> None:
    charged: list[int] = []
    agent, client = refusing_agent([True], charged)
    wf = WorkflowBuilder(AgentExecutor(agent)).build()
    store = StateStoreCheckpointStore(MemoryStore())
    first = await wf.run("charge 3 dollars", checkpoint_store=store)
    (request,) = first.pending_requests
    assert request.data.error == "the card was refused; update it"
    assert request.data.details == {"cents": 300}
    done = await first.run.send_responses({request.request_id: "card updated"})
    assert [str(o) for o in done.outputs] == ["done: receipt-1"] and charged == [300]
    assert len(client.calls) == 2  # the tool-calling answer came from the journal
