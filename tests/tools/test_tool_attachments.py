"""A tool that returns `DataContent` (an image) hands it to the model: it goes in the tool
message after the results, the result reads the rest, and the Chat Completions wire sends
it as a user message after the tool messages (a ``role: tool`` message carries text only).
"""

from __future__ import annotations

from typing import Any

from cantata.agents import ChatAgent
from cantata.core import DataContent, FunctionResultContent, Message
from cantata.models import ChatOptions, ScriptedChatClient, tool_call
from cantata.models._local_prompt import render_messages
from cantata.models._openai_mapping import to_openai_messages
from cantata.tools import tool

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 16
IMAGE = DataContent("image/png", data=PNG)


@tool
def photo(caption: bool) -> Any:
    """Take a photo."""
    return ["a dark room", IMAGE] if caption else IMAGE


@tool
def plain() -> list[Any]:
    """Plain values."""
    return ["a", 1]


def _model(calls: list[Any]) -> tuple[ScriptedChatClient, list[list[Message]]]:
    seen: list[list[Message]] = []

    def answer(messages: list[Message], options: ChatOptions) -> Any:
        seen.append(list(messages))
        return calls if len(seen) == 1 else "done"

    return ScriptedChatClient(answer), seen


async def test_returned_images_follow_the_results_in_the_tool_message() -> None:
    calls = [tool_call("photo", {"caption": True}), tool_call("photo", {"caption": False})]
    calls.append(tool_call("plain"))
    client, seen = _model(calls)
    agent = ChatAgent(client, name="cam", tools=[photo, plain])
    for streaming in (False, True):
        seen.clear()
        if streaming:
            stream = agent.run_stream("look")
            _ = [u async for u in stream]
            response = stream.response
        else:
            response = await agent.run("look")
        assert response.text == "done"
        (message,) = [m for m in seen[-1] if m.role == "tool"]
        results = message.function_results
        assert [r.result for r in results] == ["a dark room", "[attached: image/png]", ["a", 1]]
        assert message.contents[3:] == [IMAGE, IMAGE]
        wire = to_openai_messages(seen[-1])
        assert [w["role"] for w in wire] == ["user", "assistant", "tool", "tool", "tool", "user"]
        assert [p["type"] for p in wire[-1]["content"]] == ["text", "image_url", "image_url"]


def test_attachments_wait_until_the_tool_messages_end() -> None:
    calls = [tool_call("photo", call_id="c1"), tool_call("photo", call_id="c2")]
    first = Message("tool", [FunctionResultContent("c1", "[attached: image/png]"), IMAGE])
    second = Message("tool", [FunctionResultContent("c2", "later")])  # after an approval
    wire = to_openai_messages([Message("assistant", list(calls)), first, second])
    assert [w["role"] for w in wire] == ["assistant", "tool", "tool", "user"]
    wire = to_openai_messages([Message("assistant", list(calls)), first, Message("user", "hi")])
    assert [w["role"] for w in wire] == ["assistant", "tool", "user", "user"]
    assert wire[2]["content"][1]["image_url"]["url"].startswith("data:image/png;base64,")
    assert wire[3] == {"role": "user", "content": "hi"}


def test_a_text_only_model_reads_the_result_that_names_the_attachment() -> None:
    call = tool_call("photo", call_id="c1")
    rendered = render_messages(
        [
            Message("assistant", [call]),
            Message("tool", [FunctionResultContent("c1", "[attached: image/png]"), IMAGE]),
        ]
    )
    assert "[attached: image/png]" in rendered[-1]["content"]
