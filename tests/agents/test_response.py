"""AgentResponse reads like its last message; the stream aggregates once it ends."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from cantata.agents import AgentResponse, AgentResponseStream, AgentResponseUpdate
from cantata.core import (
    AgentError,
    FunctionApprovalRequestContent,
    FunctionCallContent,
    Message,
    TextContent,
)


def test_text_joins_the_new_messages() -> None:
    response = AgentResponse([Message("assistant", "a"), Message("assistant", "b")])
    assert response.text == "ab"
    assert response.content == "b"


def test_attribute_access_falls_through_to_the_last_message() -> None:
    last = Message("assistant", "hi", author_name="bot", metadata={"k": 1})
    response = AgentResponse([Message("tool", []), last])
    assert response.role == "assistant"
    assert response.author_name == "bot"
    assert response.message_id == last.message_id
    assert response.metadata == {"k": 1}


def test_unknown_attribute_of_an_empty_response_raises_attribute_error() -> None:
    with pytest.raises(AttributeError, match="role"):
        _ = AgentResponse([]).role


def test_user_input_requests_lists_pending_approvals() -> None:
    request = FunctionApprovalRequestContent("r1", FunctionCallContent("c1", "rm", {}))
    response = AgentResponse([Message("assistant", [request])])
    assert response.user_input_requests == [request]


def test_update_text_ignores_tool_contents() -> None:
    update = AgentResponseUpdate([TextContent("a"), FunctionCallContent("c", "f", {})])
    assert update.text == "a"


async def _source(n: int) -> AsyncIterator[AgentResponseUpdate]:
    for i in range(n):
        yield AgentResponseUpdate([TextContent(str(i))])


async def test_stream_builds_its_response_when_it_ends() -> None:
    stream = AgentResponseStream(_source(3), lambda: AgentResponse([Message("assistant", "012")]))
    texts = [u.text async for u in stream]
    assert texts == ["0", "1", "2"]
    assert stream.response.text == "012"
    assert [u async for u in stream] == []  # single use: ended


async def test_stream_response_is_an_error_before_the_end() -> None:
    stream = AgentResponseStream(_source(1), lambda: AgentResponse([]))
    with pytest.raises(AgentError, match="get_response"):
        _ = stream.response


async def test_failing_source_does_not_build_a_response() -> None:
    async def broken() -> AsyncIterator[AgentResponseUpdate]:
        yield AgentResponseUpdate([TextContent("x")])
        raise RuntimeError("model died")

    stream = AgentResponseStream(broken(), lambda: AgentResponse([]))
    with pytest.raises(RuntimeError, match="model died"):
        await stream.get_response()
    with pytest.raises(AgentError, match=r"failed.*model died"):
        _ = stream.response
    with pytest.raises(AgentError, match=r"failed.*model died"):  # not "iterate it to the end"
        await stream.get_response()


async def test_a_stream_closed_early_says_so_when_its_response_is_read() -> None:
    async def endless() -> AsyncIterator[AgentResponseUpdate]:
        while True:
            yield AgentResponseUpdate([TextContent("x")])

    stream = AgentResponseStream(endless(), lambda: AgentResponse([]))
    await stream.__anext__()
    await stream.aclose()
    with pytest.raises(AgentError, match="closed before the run ended"):
        await stream.get_response()


def test_response_round_trips_through_the_registry_without_its_thread() -> None:
    from cantata.agents import LocalThread
    from cantata.core import Usage, dumps, loads

    response = AgentResponse(
        [Message("assistant", [FunctionCallContent("c", "f", {"x": 1})]), Message("tool", [])],
        thread=LocalThread(),
        usage=Usage(3, 4),
        value={"answer": 42},
        agent_id="a-1",
        finish_reason="stop",
        response_id="r-1",
    )
    restored = loads(dumps(response))
    assert isinstance(restored, AgentResponse)
    assert restored.messages == response.messages
    assert (restored.usage, restored.value, restored.agent_id) == (
        Usage(3, 4),
        {"answer": 42},
        "a-1",
    )
    assert restored.thread is None


def test_update_round_trips_through_the_registry() -> None:
    from cantata.core import dumps, loads

    update = AgentResponseUpdate([TextContent("hi")], author_name="bot", agent_id="a")
    assert loads(dumps(update)) == update


def test_bad_serialized_response_is_a_serialization_error() -> None:
    from cantata.core import SerializationError, loads

    with pytest.raises(SerializationError):
        loads('{"$type": "agent_response", "messages": [1]}')


def test_copies_of_a_response_work() -> None:
    import copy

    response = AgentResponse([Message("assistant", "a")], agent_id="x")
    assert copy.copy(response).text == "a"
    assert copy.deepcopy(response).agent_id == "x"
