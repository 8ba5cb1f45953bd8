"""A model's tool call nested too deep gets an error result the model sees, and the run
goes on on a stored thread (it used to be lost when the thread stored the call)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cantata.agents import ChatAgent, StateStoreMessageStore
from cantata.core import MAX_JSON_DEPTH, Message
from cantata.models import ChatOptions, ScriptedChatClient, tool_call
from cantata.stores import MemoryStore, SQLiteStore
from cantata.tools import tool

ran: list[Any] = []


@tool
def echo(value: Any) -> str:
    """Echo a value."""
    ran.append(value)
    return "echoed"


def _nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


def _deep_text(depth: int) -> str:
    return '{"value": ' + "[" * depth + "1" + "]" * depth + "}"


@pytest.mark.parametrize(
    "arguments",
    [
        {"value": _nested(500)},  # a client that parsed the JSON already
        _deep_text(1_000),  # raw text, as a server sent it
        {"value": _nested(MAX_JSON_DEPTH - 20)},  # fits the store alone, not with its wrappers
    ],
    ids=["parsed-500", "text-1000", "just-under-the-store-limit"],
)
async def test_a_call_nested_too_deep_gets_an_error_and_the_run_goes_on(
    arguments: Any, tmp_path: Path
) -> None:
    ran.clear()
    seen: list[list[Message]] = []

    def model(messages: list[Message], options: ChatOptions) -> Any:
        seen.append(list(messages))
        if messages[-1].role == "tool":
            return "I will send flatter arguments next time."
        return [tool_call("echo", arguments, call_id="deep")]

    async with SQLiteStore(tmp_path / "threads.db") as store:
        agent = ChatAgent(
            ScriptedChatClient(model),
            name="a",
            tools=[echo],
            message_store_factory=StateStoreMessageStore.factory(store),
        )
        thread = agent.create_thread()
        response = await agent.run("echo this", thread=thread)
        assert response.text == "I will send flatter arguments next time."
        assert ran == []  # the tool never ran
        error = seen[-1][-1].function_results[0].error
        assert error is not None and "nested deeper than" in error
        stored = await thread.get_messages()
        assert [m.role for m in stored] == ["user", "assistant", "tool", "assistant"]
        text = json.dumps(await thread.serialize())  # the thread stays storable
        restored = await agent.deserialize_thread(text)
        assert len(await restored.get_messages()) == 4


async def test_a_tool_result_nested_too_deep_is_replaced_by_an_error() -> None:
    @tool
    def deep() -> Any:
        """Return something very deep."""
        return _nested(MAX_JSON_DEPTH + 50)

    store = MemoryStore()
    agent = ChatAgent(
        ScriptedChatClient([[tool_call("deep")], "done"]),
        name="a",
        tools=[deep],
        message_store_factory=StateStoreMessageStore.factory(store),
    )
    response = await agent.run("go")
    result = response.messages[1].function_results[0]
    assert result.result is None and "returned a value nested deeper" in (result.error or "")
    assert response.text == "done"
