"""The Messages wire format without a server: cache breakpoints on the tools and the
instructions, thinking blocks sent back where they stood (signature and all), tool choices,
alternating turns, cache usage, and 529 with retry-after as a retryable ModelHTTPError."""

from __future__ import annotations

from types import SimpleNamespace

import httpx

from cantata.core import (
    FunctionCallContent,
    FunctionResultContent,
    Message,
    Usage,
    from_json,
    to_json,
)
from cantata.core.retry import classify
from cantata.models import THINKING_KEY, ChatOptions, ToolSpec
from cantata.models._anthropic_mapping import request_params, usage_from

TOOL = ToolSpec("look", "Look it up.", {"type": "object", "properties": {}})


def _params(messages: list[Message], options: ChatOptions, **kw: object) -> dict:
    args = dict(model="m", max_tokens=64, prompt_caching=True, structured="tool",
                parallel_tool_calls=True, thinking_budget=None) | kw  # fmt: skip
    return request_params(messages, options, **args)  # type: ignore[arg-type]


def test_breakpoints_thinking_and_turns() -> None:
    thinking = [{"type": "thinking", "thinking": "hmm", "signature": "sig", "at": 0}]
    call = FunctionCallContent("c1", "look", {})
    messages = [
        Message("system", "Be brief."),
        Message("user", "hi"),
        Message("assistant", [call], metadata={THINKING_KEY: thinking}),
        Message("tool", [FunctionResultContent("c1", "found")]),
        Message("user", "and?"),
    ]
    params = _params(messages, ChatOptions(tools=[TOOL], tool_choice="required"),
                     parallel_tool_calls=False)  # fmt: skip
    assert params["system"] == [
        {"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}
    ]
    assert params["tools"][-1]["cache_control"] == {"type": "ephemeral"}
    assert params["tool_choice"] == {"type": "any", "disable_parallel_tool_use": True}
    assert [m["role"] for m in params["messages"]] == ["user", "assistant", "user"]
    assistant = params["messages"][1]["content"]
    assert assistant[0] == {"type": "thinking", "thinking": "hmm", "signature": "sig"}
    assert assistant[1]["type"] == "tool_use" and assistant[1]["id"] == "c1"
    user = params["messages"][2]["content"]
    assert user[0]["type"] == "tool_result" and user[1] == {"type": "text", "text": "and?"}
    with_thinking = _params(messages[:2], ChatOptions(tools=[TOOL], tool_choice="look"),
                            thinking_budget=2048)  # fmt: skip
    assert with_thinking["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert with_thinking["tool_choice"] == {"type": "auto"}  # all the API takes with thinking


def test_cache_usage_counts_in_input_and_survives_json() -> None:
    sent = SimpleNamespace(
        input_tokens=10, output_tokens=5, cache_read_input_tokens=100,
        cache_creation_input_tokens=20,
    )  # fmt: skip
    usage = usage_from(sent)
    assert usage == Usage(130, 5, 100, 20)
    assert from_json(to_json(usage)) == usage
    assert (usage + usage).cache_write_tokens == 40


def test_overloaded_is_retryable_with_the_servers_delay() -> None:
    import anthropic

    from cantata.models.anthropic import map_anthropic_error

    response = httpx.Response(529, headers={"retry-after": "7"},
                              request=httpx.Request("POST", "http://x/v1/messages"))  # fmt: skip
    exc = anthropic.APIStatusError("Overloaded", response=response, body=None)
    error = map_anthropic_error(exc, model="m", base_url="http://x")
    assert error.status_code == 529 and error.retry_after == 7.0  # type: ignore[attr-defined]
    assert classify(error) == "retryable" and "overloaded" in str(error)
