"""Evals offline: record a run once, replay it with no model; a served app's recorded
traffic (over the official `openai` client) becomes a dataset that replays and passes."""

from __future__ import annotations

from pathlib import Path

from openai import AsyncOpenAI

from cantata.agents import ChatAgent
from cantata.core import Message
from cantata.evals import (
    Case,
    Contains,
    Exact,
    MaxUsage,
    Trajectory,
    dataset_from_cassette,
    evaluate,
)
from cantata.models import (
    ChatClient,
    ChatOptions,
    RecordingChatClient,
    ReplayChatClient,
    ScriptedChatClient,
    tool_call,
)
from cantata.tools import tool

from ..serve._servers import serving


@tool
def capital(country: str) -> str:
    """The capital of a country."""
    return {"France": "Paris", "Italy": "Rome"}.get(country, "unknown")


def geographer(messages: list[Message], options: ChatOptions) -> object:
    last = messages[-1]
    if last.role == "tool":
        return f"It is {last.function_results[0].result}."
    words = last.text.rstrip("?").split()
    if words[-1] in ("France", "Italy"):
        return [tool_call("capital", {"country": words[-1]})]
    return f"I only know capitals, not {last.text!r}."


def agent(client: ChatClient) -> ChatAgent:
    return ChatAgent(client, name="geo", instructions="Answer briefly.", tools=[capital])


CASES = [
    Case("fr", "Capital of France?", "It is Paris."),
    Case("it", "Capital of Italy?", "It is Rome."),
    Case("other", "What is 2+2?", "I only know capitals, not 'What is 2+2?'."),
]


async def test_record_once_then_replay_with_no_model(tmp_path: Path) -> None:
    cassette = tmp_path / "geo.cassette.json"
    live = ScriptedChatClient(geographer)
    recorded = await evaluate(
        agent(RecordingChatClient(live, cassette)), CASES, evaluators=[Exact()], concurrency=3,
        repeats=2,
    )  # fmt: skip
    assert recorded.pass_rate == 1.0 and len(live.calls) == 10  # 2 calls per capital
    replay = ReplayChatClient(cassette)  # matches each request, whatever the order
    again = await evaluate(agent(replay), CASES, evaluators=[Exact()], concurrency=3, repeats=2)
    replay.assert_complete()
    assert len(live.calls) == 10  # the model was not asked again
    assert [(r.case, r.output, [c.name for c in r.tool_calls]) for r in again.results] == [
        (r.case, r.output, [c.name for c in r.tool_calls]) for r in recorded.results
    ]
    assert again.pass_rate == 1.0


async def test_served_traffic_becomes_a_dataset_that_replays(tmp_path: Path) -> None:
    cassette = tmp_path / "traffic.json"
    served = agent(RecordingChatClient(ScriptedChatClient(geographer), cassette))
    async with serving(served) as url:
        client = AsyncOpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=30)
        async with client:
            for question in ("Capital of France?", "What is 2+2?", "Capital of France?"):
                await client.chat.completions.create(
                    model="geo", messages=[{"role": "user", "content": question}]
                )
            await client.chat.completions.create(
                model="geo",
                messages=[
                    {"role": "user", "content": "hello"},
                    {"role": "assistant", "content": "hi"},
                    {"role": "user", "content": "Capital of Italy?"},
                ],
            )
    data = dataset_from_cassette(cassette)
    assert data.name == "traffic"
    assert [(c.input, c.expected) for c in data.cases] == [
        ("Capital of France?", "It is Paris."),
        ("What is 2+2?", "I only know capitals, not 'What is 2+2?'."),  # the repeat is dropped
        (
            [{"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi"},
             {"role": "user", "content": "Capital of Italy?"}],
            "It is Rome.",
        ),
    ]  # fmt: skip
    assert data.cases[0].evaluators == (
        Trajectory.model_validate(
            {"calls": [{"name": "capital", "arguments": {"country": "France"}}]}
        ),
    )
    assert data.cases[1].evaluators == () and data.cases[0].metadata["source"] == "recording"
    replayed = await evaluate(
        agent(ReplayChatClient(cassette)),
        data,
        evaluators=[Exact(), Contains(), MaxUsage(tool_calls=1)],
    )
    assert replayed.pass_rate == 1.0, [r.failures for r in replayed.results]
    assert len(dataset_from_cassette(cassette, dedupe=False)) == 4
