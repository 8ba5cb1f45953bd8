"""Config of the tool loop (`FunctionInvokingChatClient`): client, tools by reference,
limits and retry policy round-trip; a loop loaded from its config calls the tool; a loop
with middleware (code) is refused when written."""

from __future__ import annotations

import json
from typing import Any

import pytest

from cantata.core import ConfigurationError, Message, RetryPolicy
from cantata.declarative import SpecError, from_config, to_config
from cantata.models import OpenAIChatClient, ReplayChatClient
from cantata.tools import FunctionInvokingChatClient, chat_middleware, tool

from . import _weather_tools as weather_tools

TOOLS = [weather_tools.get_weather]
SERVER = "http://127.0.0.1:9/v1"  # never asked: these loops are written and read only


def _loop(client: Any, **options: Any) -> FunctionInvokingChatClient:
    return FunctionInvokingChatClient(client, tools=[tool(weather_tools.get_weather)], **options)


def test_loop_round_trip_keeps_limits_and_retry_policy() -> None:
    loop = _loop(
        OpenAIChatClient("m", base_url=SERVER), max_iterations=4,
        max_function_calls=7, max_consecutive_errors=None, concurrent_calls=False,
        retry_policy=RetryPolicy(attempts=2, jitter=0.0),
    )  # fmt: skip
    config = json.loads(json.dumps(to_config(loop)))
    back = from_config(config, tools=TOOLS)
    assert isinstance(back, FunctionInvokingChatClient) and to_config(back) == config
    assert back.max_iterations == 4 and back.retry_policy == RetryPolicy(attempts=2, jitter=0.0)
    assert [t.name for t in back.tools] == ["get_weather"]
    assert config["config"]["max_function_calls"] == 7
    assert config["config"]["max_consecutive_errors"] is None


async def test_a_loaded_loop_calls_its_tool(tmp_path: Any) -> None:
    from cantata.models import RecordingChatClient, ScriptedChatClient, tool_call

    path = tmp_path / "c.json"
    script = ScriptedChatClient([[tool_call("get_weather", {"city": "Oslo"})], "It is sunny."])
    answer = await _loop(RecordingChatClient(script, path)).get_response([Message("user", "?")])
    back = from_config(to_config(_loop(ReplayChatClient(path))), tools=TOOLS)
    replayed = await back.get_response([Message("user", "?")])
    assert replayed.text == answer.text == "It is sunny."
    results = [c.result for m in replayed.messages for c in m.function_results]
    assert results and results == [c.result for m in answer.messages for c in m.function_results]


def test_a_loop_with_middleware_is_not_written() -> None:
    @chat_middleware
    async def passthrough(context: Any, call_next: Any) -> None:
        await call_next()

    loop = FunctionInvokingChatClient(
        OpenAIChatClient("m", base_url=SERVER), middleware=[passthrough]
    )
    with pytest.raises(SpecError, match="middleware is Python code"):
        to_config(loop)


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"max_iterations": 0}, "max_iterations"),
        ({"max_iterations": None}, "max_iterations"),
        ({"concurrent_calls": 1}, "must be bool"),
        ({"tools": [{"provider": "cantata.teams.RoundRobin"}]}, "must be tool configs"),
        ({"retry_policy": {"attempts": "2"}}, "must be int"),
        ({"middleware": []}, "unknown field"),
    ],
)
def test_bad_loop_configs_are_typed_errors(change: dict[str, Any], match: str) -> None:
    config = to_config(_loop(OpenAIChatClient("m", base_url=SERVER)))
    config["config"].update(change)
    with pytest.raises(ConfigurationError, match=match):
        from_config(config, tools=TOOLS)
