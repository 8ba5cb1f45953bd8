"""Tools are referenced, never executed from text."""

from __future__ import annotations

import sys

import pytest

from cantata.agents import ChatAgent
from cantata.declarative import SpecError, UnknownToolError, load
from cantata.models import ScriptedChatClient, tool_call
from cantata.tools import FunctionTool, tool

from . import _weather_tools as weather_tools

MOD = weather_tools.__name__


def _spec(*tools: object) -> dict[str, object]:
    return {
        "version": 1,
        "type": "chat_agent",
        "name": "w",
        "model": {"api": "scripted"},
        "tools": list(tools),
    }


def test_tool_by_name_and_by_import_path_from_tools_given() -> None:
    weather = tool(weather_tools.get_weather)
    agent = load(_spec("get_weather"), tools=[weather])
    assert agent.tools == (weather,)
    agent = load(_spec({"id": f"{MOD}.get_weather"}), tools=[weather])
    assert agent.tools == (weather,)


def test_tool_renamed_in_the_spec() -> None:
    agent = load(
        _spec({"id": "get_weather", "name": "forecast"}), tools=[weather_tools.get_weather]
    )
    assert [t.name for t in agent.tools] == ["forecast"]
    assert agent.tools[0].func is weather_tools.get_weather


def test_tool_from_an_allowed_import_path() -> None:
    agent = load(_spec(f"{MOD}.add"), allow=[MOD])
    assert agent.tools[0].name == "add"
    assert agent.tools[0].func is weather_tools.add


def test_unknown_tool_lists_the_available_ones() -> None:
    with pytest.raises(UnknownToolError) as info:
        load(_spec(f"{MOD}.add"), tools=[weather_tools.get_weather])
    message = str(info.value)
    assert f"{MOD}.add" in message
    assert "get_weather" in message and "allow=" in message
    assert "get_weather" in info.value.available


def test_a_module_outside_the_allow_list_is_never_imported() -> None:
    sys.modules.pop("calendar", None)
    with pytest.raises(UnknownToolError):
        load(_spec("calendar.isleap"), allow=[MOD])
    assert "calendar" not in sys.modules
    with pytest.raises(UnknownToolError):  # a prefix of a name is not its namespace
        load(_spec(f"{MOD}_evil.add"), allow=[MOD])


def test_allowed_path_that_is_not_a_function() -> None:
    with pytest.raises(SpecError, match="not a function"):
        load(_spec(f"{MOD}.IMPORTED"), allow=[MOD])
    with pytest.raises(UnknownToolError, match="cannot be imported"):
        load(_spec(f"{MOD}.missing"), allow=[MOD])


async def test_agent_calls_its_referenced_tool() -> None:
    spec = _spec("get_weather")
    spec["model"] = {"api": "scripted", "connection": {"script": []}}
    agent = load(spec, tools=[weather_tools.get_weather])
    client = ScriptedChatClient([tool_call("get_weather", {"city": "Oslo"}), "done"])
    assert isinstance(agent.tools[0], FunctionTool)
    live = ChatAgent(client, name="w", tools=agent.tools)
    response = await live.run("weather?")
    assert response.text == "done"
    results = [m for m in client.calls[1].messages if m.role == "tool"]
    assert results[0].contents[0].result == "sunny in Oslo"
