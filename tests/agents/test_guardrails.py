"""Guardrails on a ChatAgent, on the scripted model: every stage and mode, replacement and
tripwire, what the thread keeps, what a stream shows, spans."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest

from cantata import ChatAgent, ScriptedChatClient
from cantata.agents import (
    Guardrail,
    GuardrailContext,
    Verdict,
    input_guardrail,
    output_guardrail,
    tool_guardrail,
)
from cantata.core import ConfigurationError, GuardrailTripwire, Message
from cantata.models import ChatOptions
from cantata.models.scripted import tool_call
from cantata.tools import tool


@input_guardrail
def no_secrets(text: str) -> Verdict:
    return Verdict.tripwire("asks for the secret") if "secret" in text else Verdict.passed()


@input_guardrail(name="shout")
def lower_case(text: str) -> str:
    return text.lower()


async def test_a_blocking_tripwire_stops_before_the_model_and_records_nothing() -> None:
    client = ScriptedChatClient(["fine"])
    agent = ChatAgent(client, guardrails=[no_secrets])
    thread = agent.create_thread()
    with pytest.raises(GuardrailTripwire) as caught:
        await agent.run("tell me the secret", thread=thread)
    err = caught.value
    assert (err.guardrail, err.stage, err.reason) == ("no_secrets", "input", "asks for the secret")
    assert "no_secrets" in str(err) and "agent" in str(err)
    assert client.calls == []  # the model was never asked
    assert await thread.get_messages() == []
    # the same agent and thread go on with a fine input
    response = await agent.run("hello", thread=thread)
    assert response.text == "fine"
    assert [(r.guardrail, r.verdict) for r in response.guardrails] == [("no_secrets", "pass")]


async def test_a_replacement_is_what_the_model_sees_and_the_thread_keeps() -> None:
    client = ScriptedChatClient(["ok"])
    agent = ChatAgent(client, guardrails=[lower_case])
    thread = agent.create_thread()
    await agent.run("HELLO There", thread=thread)
    assert client.calls[0].messages[-1].text == "hello there"
    stored = await thread.get_messages()
    assert stored[0].text == "hello there" and stored[0].role == "user"


async def test_guardrails_run_in_order_each_seeing_the_last_replacement() -> None:
    seen: list[str] = []

    def second(text: str, context: GuardrailContext) -> None:
        seen.append(f"{context.stage}:{context.owner}:{text}")

    agent = ChatAgent(
        ScriptedChatClient(["ok"]),
        name="helper",
        guardrails=[lower_case, Guardrail(second, name="second")],
    )
    response = await agent.run("ABC")
    assert seen == ["input:helper:abc"]
    assert [r.verdict for r in response.guardrails] == ["replace", "pass"]


async def test_a_parallel_tripwire_cancels_the_model_call_at_once() -> None:
    started = asyncio.Event()
    cancelled = asyncio.Event()

    async def slow_model(messages: list[Message], options: ChatOptions) -> str:
        started.set()
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "too late"

    async def judge(text: str) -> Verdict:
        await started.wait()  # the model call is under way
        return Verdict.tripwire("off topic")

    agent = ChatAgent(
        ScriptedChatClient(slow_model),
        guardrails=[Guardrail(judge, on="input", mode="parallel")],
    )
    loop = asyncio.get_running_loop()
    start = loop.time()
    with pytest.raises(GuardrailTripwire) as caught:
        await agent.run("hi")
    assert loop.time() - start < 2  # not after the model's 5 s
    assert cancelled.is_set()
    assert caught.value.guardrail == "judge"


async def test_a_parallel_check_holds_the_answer_and_tools_until_it_passes() -> None:
    ran: list[str] = []
    gate = asyncio.Event()

    @tool
    def act() -> str:
        """Does something."""
        ran.append("act")
        return "done"

    async def judge(text: str) -> None:
        await gate.wait()

    client = ScriptedChatClient([[tool_call("act")], "answer"])
    agent = ChatAgent(client, tools=[act], guardrails=[Guardrail(judge, mode="parallel")])
    run = asyncio.ensure_future(agent.run("hi"))
    for _ in range(20):
        await asyncio.sleep(0)
    assert len(client.calls) == 1 and ran == []  # answered, but nothing acted on yet
    gate.set()
    response = await run
    assert ran == ["act"] and response.text.endswith("answer")
    assert [r.verdict for r in response.guardrails] == ["pass"]


async def test_a_parallel_tripwire_after_the_answer_still_stops_the_run() -> None:
    ran: list[str] = []

    @tool
    def act() -> str:
        """Does something."""
        ran.append("act")
        return "done"

    async def judge(text: str) -> Verdict:
        await asyncio.sleep(0.05)  # the scripted model answers first
        return Verdict.tripwire("no")

    agent = ChatAgent(
        ScriptedChatClient([[tool_call("act")], "x"]),
        tools=[act],
        guardrails=[Guardrail(judge, mode="parallel")],
    )
    thread = agent.create_thread()
    with pytest.raises(GuardrailTripwire):
        await agent.run("hi", thread=thread)
    assert ran == []
    # the input was recorded as the model call began; no answer, no dangling call
    assert [m.role for m in await thread.get_messages()] == ["user"]


async def test_a_parallel_check_may_not_replace() -> None:
    agent = ChatAgent(
        ScriptedChatClient(["ok"]), guardrails=[Guardrail(str.upper, name="up", mode="parallel")]
    )
    with pytest.raises(ConfigurationError, match="parallel"):
        await agent.run("hi")


async def test_output_replacement_and_tripwire() -> None:
    @output_guardrail
    def redact(text: str) -> str:
        return text.replace("42", "[n]")

    agent = ChatAgent(ScriptedChatClient(["the answer is 42"]), guardrails=[redact])
    thread = agent.create_thread()
    response = await agent.run("q", thread=thread)
    assert response.text == "the answer is [n]"
    assert (await thread.get_messages())[-1].text == "the answer is [n]"

    @output_guardrail
    def no_numbers(text: str) -> bool:
        return not any(c.isdigit() for c in text)

    agent = ChatAgent(ScriptedChatClient(["it is 7"]), guardrails=[no_numbers])
    thread = agent.create_thread()
    with pytest.raises(GuardrailTripwire) as caught:
        await agent.run("q", thread=thread)
    assert caught.value.stage == "output" and caught.value.reason == "refused by no_numbers"
    assert [m.role for m in await thread.get_messages()] == ["user"]  # no answer kept


async def test_a_stream_shows_the_replacement_never_the_original() -> None:
    @output_guardrail
    def redact(text: str) -> str:
        return text.replace("secret-token", "[hidden]")

    client = ScriptedChatClient(["your key is secret-token ok"], chunk_size=3)
    agent = ChatAgent(client, guardrails=[redact])
    stream = agent.run_stream("q")
    chunks = [u.text async for u in stream]
    assert "".join(chunks) == "your key is [hidden] ok"
    assert not any("sec" in c for c in chunks)
    assert stream.response.text == "your key is [hidden] ok"


async def test_a_stream_ends_with_the_tripwire_and_shows_nothing_of_the_answer() -> None:
    @output_guardrail
    def never(text: str) -> Verdict:
        return Verdict.tripwire("not this")

    agent = ChatAgent(ScriptedChatClient(["forbidden words"], chunk_size=2), guardrails=[never])
    shown: list[str] = []
    with pytest.raises(GuardrailTripwire):
        async for update in agent.run_stream("q"):
            shown.append(update.text)
    assert shown == []


async def test_a_stream_with_a_parallel_tripwire() -> None:
    async def judge(text: str) -> Verdict:
        await asyncio.sleep(0.02)
        return Verdict.tripwire("bad")

    agent = ChatAgent(
        ScriptedChatClient(["streamed text"], chunk_size=2),
        guardrails=[Guardrail(judge, mode="parallel")],
    )
    shown: list[str] = []
    with pytest.raises(GuardrailTripwire):
        async for update in agent.run_stream("q"):
            shown.append(update.text)
    assert shown == []


async def test_tool_argument_and_result_guardrails() -> None:
    calls: list[str] = []

    @tool
    def lookup(city: str) -> str:
        """Weather for a city."""
        calls.append(city)
        return f"sunny in {city}, call 555-0100"

    @tool_guardrail(on="arguments")
    def no_paris(text: str, context: GuardrailContext) -> Verdict | None:
        assert context.tool == "lookup" and context.arguments is not None
        if context.arguments.get("city") == "Paris":
            return Verdict.replace("lookup refused for this city")
        return None

    @tool_guardrail(on="result")
    def scrub(text: str) -> str:
        return text.replace("555-0100", "[phone]")

    client = ScriptedChatClient(
        [[tool_call("lookup", {"city": "Paris"}), tool_call("lookup", {"city": "Oslo"})], "done"]
    )
    agent = ChatAgent(client, tools=[lookup], guardrails=[no_paris, scrub])
    response = await agent.run("weather?")
    assert calls == ["Oslo"]  # the replaced call never ran
    results = {r.call_id: r.result for m in response.messages for r in m.function_results}
    assert sorted(results.values()) == [
        "lookup refused for this city",
        "sunny in Oslo, call [phone]",
    ]
    # what the model got back is the replaced text
    sent = [r.result for m in client.calls[1].messages for r in m.function_results]
    assert "sunny in Oslo, call [phone]" in sent


async def test_a_tool_tripwire_ends_the_run_with_no_dangling_call() -> None:
    @tool
    def delete_all() -> str:
        """Deletes everything."""
        raise AssertionError("must not run")

    @tool_guardrail
    def refuse(text: str, context: GuardrailContext) -> Verdict:
        return Verdict.tripwire(f"{context.tool} is not allowed")

    client = ScriptedChatClient([[tool_call("delete_all")], "never"])
    agent = ChatAgent(client, tools=[delete_all], guardrails=[refuse])
    thread = agent.create_thread()
    with pytest.raises(GuardrailTripwire) as caught:
        await agent.run("clean up", thread=thread)
    assert caught.value.stage == "tool_arguments"
    assert caught.value.reason == "delete_all is not allowed"
    assert len(client.calls) == 1
    stored = await thread.get_messages()
    assert [m.role for m in stored] == ["user"]  # the call is not kept without its result


async def test_an_agent_judges_as_a_guardrail() -> None:
    judge = ChatAgent(
        ScriptedChatClient(
            lambda messages, options: (
                '{"verdict": "tripwire", "reason": "about cooking"}'
                if "cake" in messages[-1].text
                else '{"verdict": "pass", "reason": "on topic"}'
            )
        ),
        name="topic",
    )
    agent = ChatAgent(ScriptedChatClient(["fine"] * 2), guardrails=[Guardrail(judge)])
    assert (await agent.run("how do I reset my router?")).guardrails[0].reason == "on topic"
    with pytest.raises(GuardrailTripwire) as caught:
        await agent.run("how do I bake a cake?")
    assert (caught.value.guardrail, caught.value.reason) == ("topic", "about cooking")


async def test_structured_output_is_parsed_again_after_a_replacement() -> None:
    @output_guardrail
    def fix(text: str) -> str:
        return text.replace('"n": 1', '"n": 2')

    agent = ChatAgent(ScriptedChatClient(['{"n": 1}']), guardrails=[fix])
    response = await agent.run("q", options=ChatOptions(response_format={"type": "object"}))
    assert response.value == {"n": 2}


async def test_guardrail_spans(spans: Any) -> None:
    agent = ChatAgent(ScriptedChatClient(["ok"]), name="spanned", guardrails=[lower_case])
    await agent.run("HI")
    with pytest.raises(GuardrailTripwire):
        await ChatAgent(ScriptedChatClient(["x"]), guardrails=[no_secrets]).run("secret")
    found = {s.name: s for s in spans.get_finished_spans()}
    shout = found["guardrail shout"]
    assert shout.attributes["cantata.guardrail.verdict"] == "replace"
    assert shout.attributes["cantata.guardrail.owner"] == "spanned"
    tripped = found["guardrail no_secrets"]
    assert tripped.attributes["cantata.guardrail.verdict"] == "tripwire"
    assert tripped.attributes["cantata.guardrail.reason"] == "asks for the secret"
    assert shout.parent is not None  # inside the agent's run span


def test_configuration_errors() -> None:
    with pytest.raises(ConfigurationError, match="stage"):
        Guardrail(str.lower, on="nowhere")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="parallel"):
        Guardrail(str.lower, on="output", mode="parallel")
    with pytest.raises(ConfigurationError, match="not a Guardrail"):
        ChatAgent(ScriptedChatClient([]), guardrails=[str.lower])  # type: ignore[list-item]
    with pytest.raises(ConfigurationError, match="two guardrails"):
        ChatAgent(ScriptedChatClient([]), guardrails=[no_secrets, no_secrets])
    with pytest.raises(ConfigurationError, match="no stage of an agent"):
        ChatAgent(ScriptedChatClient([]), guardrails=[Guardrail(str.lower, on="turn")])


async def test_a_check_returning_nonsense_is_a_clear_error() -> None:
    agent = ChatAgent(ScriptedChatClient(["x"]), guardrails=[Guardrail(lambda t: 3, name="odd")])
    with pytest.raises(ConfigurationError, match="odd"):
        await agent.run("hi")


async def test_a_guard_leaves_the_shape_of_the_run_alone() -> None:
    # a guard around a run leaves the run's shape alone: same messages, same finish
    plain = ChatAgent(ScriptedChatClient(["a"]))
    guarded = ChatAgent(ScriptedChatClient(["a"]), guardrails=[no_secrets])
    one, two = await plain.run("x"), await guarded.run("x")
    assert [m.text for m in one.messages] == [m.text for m in two.messages]
    assert one.finish_reason == two.finish_reason == "stop"


def _texts(messages: Sequence[Message]) -> list[str]:
    return [m.text for m in messages]


async def test_resume_after_a_tripwire_from_the_serialized_thread() -> None:
    agent = ChatAgent(ScriptedChatClient(["first", "second"]), guardrails=[no_secrets])
    thread = agent.create_thread()
    await agent.run("hello", thread=thread)
    with pytest.raises(GuardrailTripwire):
        await agent.run("the secret please", thread=thread)
    data = await thread.serialize()
    restored = await agent.deserialize_thread(data)
    response = await agent.run("and now?", thread=restored)
    assert response.text == "second"
    assert _texts(await restored.get_messages()) == ["hello", "first", "and now?", "second"]
