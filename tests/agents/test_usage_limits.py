"""Usage limits on a ChatAgent, on the scripted model: each limit stops the run before the
model call (or tool call) that would pass it, never after; usage per model, per agent,
per thread; cost from a price table, cache reads apart."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from cantata import ChatAgent, ScriptedChatClient
from cantata.agents import ModelPrice, RunUsage, UsageLimits
from cantata.core import ConfigurationError, Message, Usage, UsageLimitExceeded
from cantata.models import ChatOptions, ChatResponse
from cantata.models.scripted import tool_call
from cantata.tools import tool


@tool
def ping() -> str:
    """Answers pong."""
    return "pong"


def _looping(n_tools: int = 5, usage: Usage | None = None) -> ScriptedChatClient:
    """A model that calls `ping` `n_tools` times, one call per answer, then answers."""
    return ScriptedChatClient(
        [*([[tool_call("ping")]] * n_tools), "done"], usage=usage or Usage(10, 5)
    )


@pytest.mark.parametrize(
    ("limits", "calls_made", "limit"),
    [
        (UsageLimits(model_calls=2), 2, "model_calls"),
        (UsageLimits(input_tokens=25), 3, "input_tokens"),  # 10, 20, 30 -> stop
        (UsageLimits(output_tokens=10), 2, "output_tokens"),  # 5, 10 -> stop
        (UsageLimits(total_tokens=30), 2, "total_tokens"),  # 15, 30 -> stop
        (UsageLimits(model_calls=0), 0, "model_calls"),
    ],
)
async def test_each_limit_stops_before_the_next_model_call(
    limits: UsageLimits, calls_made: int, limit: str
) -> None:
    client = _looping()
    agent = ChatAgent(client, tools=[ping], usage_limits=limits)
    with pytest.raises(UsageLimitExceeded) as caught:
        await agent.run("go")
    err = caught.value
    assert len(client.calls) == calls_made  # never one more
    assert err.limit == limit and err.scope == "run"
    assert err.used >= err.allowed
    assert limit in str(err) and "UsageLimits" in str(err)


async def test_a_run_under_its_limits_ends_normally_with_its_usage() -> None:
    client = _looping(2)
    agent = ChatAgent(client, name="pinger", tools=[ping], usage_limits=UsageLimits(model_calls=3))
    response = await agent.run("go")
    assert response.text.endswith("done")
    usage = response.run_usage
    assert usage is not None
    assert (usage.model_calls, usage.tool_calls) == (3, 2)
    assert usage.by_model == {"scripted": Usage(30, 15)}
    assert usage.by_agent == {"pinger": Usage(30, 15)}
    assert usage.usage == response.usage


async def test_the_tool_call_limit_stops_before_the_tool_runs() -> None:
    ran: list[int] = []

    @tool
    def count() -> int:
        """Counts."""
        ran.append(1)
        return len(ran)

    client = ScriptedChatClient(
        [[tool_call("count"), tool_call("count")], [tool_call("count")], "x"]
    )
    agent = ChatAgent(
        client, tools=[count], usage_limits=UsageLimits(tool_calls=2), max_iterations=5
    )
    with pytest.raises(UsageLimitExceeded) as caught:
        await agent.run("go")
    assert caught.value.limit == "tool_calls"
    assert len(ran) == 2 and len(client.calls) == 2


async def test_the_wall_clock_limit() -> None:
    async def slow(messages: list[Message], options: ChatOptions) -> Any:
        await asyncio.sleep(0.2)
        return [tool_call("ping")]

    client = ScriptedChatClient(slow)
    agent = ChatAgent(client, tools=[ping], usage_limits=UsageLimits(seconds=0.3))
    with pytest.raises(UsageLimitExceeded) as caught:
        await agent.run("go")
    assert caught.value.limit == "seconds"
    assert len(client.calls) == 2  # 0.2 s, 0.4 s: the third is not made


async def test_cost_from_the_price_table_with_cache_reads_apart() -> None:
    prices = {"big": ModelPrice(input=2.0, output=8.0, cached_input=0.5)}
    usage = Usage(1_000_000, 100_000, cached_input_tokens=400_000)
    # 600k * 2 + 400k * 0.5 + 100k * 8 per million = 1.2 + 0.2 + 0.8 = 2.2 a call
    assert prices["big"].cost(usage) == pytest.approx(2.2)
    client = ScriptedChatClient([[tool_call("ping")]] * 5 + ["x"], usage=usage, model="big")
    agent = ChatAgent(client, tools=[ping], usage_limits=UsageLimits(cost=4.0, prices=prices))
    with pytest.raises(UsageLimitExceeded) as caught:
        await agent.run("go")
    assert caught.value.limit == "cost"
    assert caught.value.used == pytest.approx(4.4)
    assert len(client.calls) == 2


async def test_a_model_missing_from_the_price_table_is_a_clear_error() -> None:
    agent = ChatAgent(
        ScriptedChatClient(["x"], usage=Usage(1, 1), model="unpriced"),
        usage_limits=UsageLimits(cost=1.0, prices={"other": ModelPrice(1, 1)}),
    )
    with pytest.raises(ConfigurationError, match="unpriced"):
        await agent.run("go")


async def test_usage_per_model_when_the_answer_names_it() -> None:
    answers = iter(["a", "b"])

    def script(messages: list[Message], options: ChatOptions) -> ChatResponse:
        model = "small" if len(messages) < 3 else "large"
        return ChatResponse([Message("assistant", next(answers))], usage=Usage(3, 1), model=model)

    agent = ChatAgent(ScriptedChatClient(script), usage_limits=UsageLimits(model_calls=10))
    thread = agent.create_thread()
    first = await agent.run("one", thread=thread)
    second = await agent.run("two", thread=thread)
    assert first.run_usage is not None and second.run_usage is not None
    assert first.run_usage.by_model == {"small": Usage(3, 1)}
    assert second.run_usage.by_model == {"large": Usage(3, 1)}


async def test_a_thread_limit_counts_every_run_of_the_thread_and_survives_serializing() -> None:
    client = ScriptedChatClient(["a", "b", "c", "d"], usage=Usage(10, 10))
    agent = ChatAgent(client, usage_limits=UsageLimits(total_tokens=50, per="thread"))
    thread = agent.create_thread()
    await agent.run("1", thread=thread)  # 20
    restored = await agent.deserialize_thread(await thread.serialize())
    await agent.run("2", thread=restored)  # 40
    await agent.run("3", thread=restored)  # 60: made, since 40 < 50 before it
    with pytest.raises(UsageLimitExceeded) as caught:
        await agent.run("4", thread=restored)
    assert caught.value.scope == "thread" and caught.value.used == 60
    assert len(client.calls) == 3
    # another thread starts afresh
    assert (await agent.run("new")).text == "d"


async def test_run_and_thread_limits_together() -> None:
    client = _looping(3)
    agent = ChatAgent(
        client,
        tools=[ping],
        usage_limits=[UsageLimits(model_calls=10, per="thread"), UsageLimits(model_calls=2)],
    )
    with pytest.raises(UsageLimitExceeded) as caught:
        await agent.run("go")
    assert caught.value.scope == "run"


async def test_streamed_runs_stop_the_same_way() -> None:
    client = _looping()
    agent = ChatAgent(client, tools=[ping], usage_limits=UsageLimits(model_calls=2))
    with pytest.raises(UsageLimitExceeded):
        async for _ in agent.run_stream("go"):
            pass
    assert len(client.calls) == 2


def test_limits_are_checked_when_made() -> None:
    with pytest.raises(ConfigurationError):
        UsageLimits(total_tokens=-1)
    with pytest.raises(ConfigurationError):
        UsageLimits(seconds=float("nan"))
    with pytest.raises(ConfigurationError, match="prices"):
        UsageLimits(cost=1.0)
    with pytest.raises(ConfigurationError):
        UsageLimits(per="week")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError):
        ModelPrice(input=-1, output=0)
    with pytest.raises(ConfigurationError, match="UsageLimits"):
        ChatAgent(ScriptedChatClient([]), usage_limits=[3])  # type: ignore[list-item]


def test_run_usage_json_round_trip_and_damaged_data() -> None:
    usage = RunUsage(
        by_model={"m": Usage(1, 2, 1)}, by_agent={"a": Usage(1, 2, 1)}, model_calls=1, cost=0.5
    )
    assert RunUsage.from_json(usage.to_json()) == usage
    assert RunUsage.from_json({"model_calls": -3, "by_model": {"m": {"input_tokens": "x"}}}) == (
        RunUsage()
    )
    assert RunUsage.from_json("nonsense") == RunUsage()
