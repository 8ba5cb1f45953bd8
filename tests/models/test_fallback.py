"""FallbackChatClient moves on only on errors another model may not have, records why on the
answer and in the trace, and streams from the first client that opens; RoutingChatClient
sends each request where a function of it says. (Real servers: test_fallback_servers.py.)"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest

from cantata.agents import ChatAgent
from cantata.core import (
    CancellationToken,
    ConfigurationError,
    Message,
    ModelConnectionError,
    ModelHTTPError,
    TimeoutError,
)
from cantata.models import (
    FALLBACK_KEY,
    ROUTE_KEY,
    ChatOptions,
    ChatResponse,
    ChatResponseUpdate,
    FallbackChatClient,
    RoutingChatClient,
    ScriptedChatClient,
    client_label,
)


def down(status: int = 503) -> ScriptedChatClient:
    error = ModelHTTPError("overloaded", status_code=status, retry_after=3.0)
    return ScriptedChatClient([error, error], model=f"down{status}")


class _BreaksMidStream:
    """Streams one piece of text, then fails: the caller has seen part of an answer."""

    model = "breaks"

    async def get_response(self, messages: Sequence[Message], **_: Any) -> ChatResponse:
        raise AssertionError("not used")

    async def get_streaming_response(
        self,
        messages: Sequence[Message],
        *,
        options: ChatOptions | None = None,
        cancellation_token: CancellationToken | None = None,
    ) -> AsyncIterator[ChatResponseUpdate]:
        yield ChatResponseUpdate([], message_id="m")
        raise ModelConnectionError("dropped")


async def test_a_retryable_failure_moves_on_and_the_answer_says_why(spans: Any) -> None:
    backup = ScriptedChatClient(["from the backup"], model="backup")
    client = FallbackChatClient(down(429), down(503), backup)
    response = await client.get_response([Message("user", "hi")])
    assert response.text == "from the backup"
    record = response.messages[0].metadata[FALLBACK_KEY]
    assert record["answered_by"] == client_label(backup) and record["index"] == 2
    assert record["model"] == "backup"
    assert [s["error"] for s in record["skipped"]] == ["ModelHTTPError", "ModelHTTPError"]
    assert "overloaded" in record["skipped"][0]["message"]
    attempts = [s for s in spans.get_finished_spans() if s.name.startswith("fallback ")]
    assert [s.status.is_ok for s in attempts] == [False, False, True]
    last = attempts[-1].attributes
    assert last["cantata.fallback.reason"] == "ModelHTTPError: overloaded"
    assert list(last["cantata.fallback.skipped"]) == ["ScriptedChatClient('down429')",
                                                      "ScriptedChatClient('down503')"]  # fmt: skip


async def test_an_error_another_model_would_share_is_raised_at_once() -> None:
    backup = ScriptedChatClient(["never"])
    with pytest.raises(ModelHTTPError) as caught:
        await FallbackChatClient(down(400), backup).get_response([Message("user", "hi")])
    assert caught.value.status_code == 400
    assert backup.calls == []


async def test_when_all_fail_the_last_error_is_raised_with_the_earlier_ones_noted() -> None:
    timeout = ScriptedChatClient([TimeoutError("slow")], model="slow")
    with pytest.raises(TimeoutError) as caught:
        await FallbackChatClient(down(529), timeout).get_response([Message("user", "hi")])
    notes = "\n".join(caught.value.__notes__)
    assert "ScriptedChatClient('down529') failed: ModelHTTPError: overloaded" in notes


async def test_a_custom_rule_decides_when_to_move_on() -> None:
    client = FallbackChatClient(
        down(400), ScriptedChatClient(["ok"]), should_fall_back=lambda exc: True
    )
    assert (await client.get_response([Message("user", "hi")])).text == "ok"


async def test_a_stream_moves_on_before_its_first_update_only() -> None:
    backup = ScriptedChatClient(["streamed answer"], model="backup")
    client = FallbackChatClient(down(503), backup)
    updates = [u async for u in client.get_streaming_response([Message("user", "hi")])]
    response = ChatResponse.from_updates(updates)
    assert response.text == "streamed answer"
    assert response.messages[0].metadata[FALLBACK_KEY]["skipped"][0]["error"] == "ModelHTTPError"
    broken = FallbackChatClient(_BreaksMidStream(), ScriptedChatClient(["never"]))
    with pytest.raises(ModelConnectionError):
        async for _ in broken.get_streaming_response([Message("user", "hi")]):
            pass


async def test_an_agent_on_a_fallback_client_keeps_the_record_in_its_thread() -> None:
    agent = ChatAgent(FallbackChatClient(down(), ScriptedChatClient(["fine", "again"])))
    thread = agent.create_thread()
    first = await agent.run("hello", thread=thread)
    assert first.messages[-1].metadata[FALLBACK_KEY]["index"] == 1
    stream = [u async for u in agent.run_stream("more", thread=thread)]
    assert "".join(u.text for u in stream) == "again"
    history = await thread.get_messages()
    assert [m.metadata[FALLBACK_KEY]["index"] for m in history if m.role == "assistant"] == [1, 1]


def test_a_fallback_needs_clients() -> None:
    with pytest.raises(ConfigurationError, match="at least one"):
        FallbackChatClient()
    with pytest.raises(ConfigurationError, match="ChatClients"):
        FallbackChatClient("openai:gpt-4o-mini")  # type: ignore[arg-type]


async def test_routing_picks_a_client_per_request() -> None:
    small = ScriptedChatClient(["small one", "small two"], model="small")
    large = ScriptedChatClient(["large one"], model="large")

    async def route(messages: Sequence[Message], options: ChatOptions) -> str:
        return "large" if options.tools or len(messages[-1].text) > 20 else "small"

    client = RoutingChatClient(route, clients={"small": small, "large": large})
    short = await client.get_response([Message("user", "hi")])
    long = await client.get_response([Message("user", "explain the theory of everything")])
    assert (short.text, long.text) == ("small one", "large one")
    assert long.messages[0].metadata[ROUTE_KEY] == "large"
    updates = [u async for u in client.get_streaming_response([Message("user", "yo")])]
    assert ChatResponse.from_updates(updates).messages[0].metadata[ROUTE_KEY] == "small"
    direct = RoutingChatClient(lambda messages, options: large)
    assert direct.clients == {}
    with pytest.raises(ConfigurationError, match="not one of its clients"):
        await RoutingChatClient(lambda m, o: "huge", clients={"small": small}).get_response([])
    with pytest.raises(ConfigurationError, match="must return a ChatClient"):
        await RoutingChatClient(lambda m, o: 42).get_response([])  # type: ignore[arg-type,return-value]
