"""ScriptedChatClient: streaming parity, and a recorded session (cassette) as a plain script."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cantata.core import Message, ModelError
from cantata.models import ChatResponse, RecordingChatClient, ScriptedChatClient


async def test_from_cassette_plays_recorded_answers_in_order(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    recorder = RecordingChatClient(ScriptedChatClient(["one", "two"]), path)
    await recorder.get_response([Message("user", "a")])
    await recorder.get_response([Message("user", "b")])
    script = ScriptedChatClient.from_cassette(path, chunk_size=2)
    assert (await script.get_response([Message("user", "whatever")])).text == "one"
    pieces = [u.text async for u in script.get_streaming_response([Message("user", "x")])]
    assert [p for p in pieces if p] == ["tw", "o"]
    script.assert_complete()
    with pytest.raises(ModelError, match="ran out"):
        await script.get_response([Message("user", "more")])


async def test_an_empty_answer_streams_the_same_message_as_a_whole_one() -> None:
    whole = await ScriptedChatClient([""]).get_response([Message("user", "hi")])
    updates = [u async for u in ScriptedChatClient([""]).get_streaming_response([])]
    streamed = ChatResponse.from_updates(updates)
    assert [m.role for m in streamed.messages] == [m.role for m in whole.messages] == ["assistant"]
    assert streamed.text == whole.text == ""


async def test_recorded_requests_are_what_was_sent_and_share_their_history() -> None:
    from cantata.agents import ChatAgent, TruncatingReducer
    from cantata.models import ChatOptions, tool_call
    from cantata.tools import tool

    @tool
    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    sent: list[list[Message]] = []

    def model(messages: list[Message], options: ChatOptions) -> Any:
        sent.append(list(messages))
        return "3" if messages[-1].role == "tool" else [tool_call("add", {"a": 1, "b": 2})]

    client = ScriptedChatClient(model)
    agent = ChatAgent(client, name="calc", instructions="Add.", tools=[add])
    reduced = ChatAgent(
        client, name="short", instructions="Add.", tools=[add], history_reducer=TruncatingReducer(6)
    )
    thread, other = agent.create_thread(), reduced.create_thread()
    turns = 60
    for i in range(turns):
        await agent.run(f"q{i}", thread=thread)
        await reduced.run(f"r{i}", thread=other)
    assert len(client.calls) == len(sent) == 4 * turns
    for call, messages in zip(client.calls, sent, strict=True):
        recorded = call.messages
        assert len(recorded) == len(messages)
        assert all(a is b for a, b in zip(recorded, messages, strict=True))
    # what is kept grows with the messages, not with turns x history (which is ~ 4 * turns^2)
    kept = sum(len(call._head) + len(call._tail) for call in client.calls)
    assert kept < 30 * turns


async def test_a_request_list_changed_after_the_call_leaves_the_record_alone() -> None:
    client = ScriptedChatClient(["a", "b"])
    messages = [Message("user", "one")]
    await client.get_response(messages)
    messages.append(Message("user", "two"))
    messages[0] = Message("user", "replaced")
    await client.get_response(messages)
    assert [m.text for m in client.calls[0].messages] == ["one"]
    assert [m.text for m in client.calls[1].messages] == ["replaced", "two"]
    client.calls.clear()  # a test may reset what it looks at
    await ScriptedChatClient(["x"]).get_response(messages)


async def test_the_scripted_client_is_an_async_context_manager_like_network_clients() -> None:
    from cantata.agents import ChatAgent

    async with ScriptedChatClient(["hi", "again"]) as client:
        assert not client.closed
        assert (await client.get_response([Message("user", "x")])).text == "hi"
    assert client.closed
    assert (await client.get_response([Message("user", "y")])).text == "again"
    owned = ScriptedChatClient(["a"])
    async with ChatAgent(owned, name="a", owns_client=True):
        pass
    assert owned.closed
