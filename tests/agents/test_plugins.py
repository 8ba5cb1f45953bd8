"""Plugins: an object given as a tool offers its @tool-marked methods, bound to it."""

from __future__ import annotations

import pytest

from cantata.agents import ChatAgent
from cantata.core import ConfigurationError
from cantata.models import ScriptedChatClient, tool_call
from cantata.tools import tool


class MenuPlugin:
    """Semantic Kernel style: state on the instance, tools as marked methods."""

    def __init__(self, specials: dict[str, int]) -> None:
        self.specials = specials
        self.asked: list[str] = []

    @tool
    def list_specials(self) -> list[str]:
        """The specials of the day."""
        return sorted(self.specials)

    @tool
    async def price(self, item: str) -> int:
        """The price of one special."""
        self.asked.append(item)
        return self.specials[item]

    def helper(self) -> None:
        """Not marked: not a tool."""


async def test_an_agent_offers_the_marked_methods_of_a_plugin_bound_to_it() -> None:
    menu = MenuPlugin({"soup": 4, "pie": 6})
    client = ScriptedChatClient(
        [[tool_call("list_specials")], [tool_call("price", {"item": "pie"})], "Pie is 6."]
    )
    agent = ChatAgent(client, name="waiter", tools=[menu])
    assert [t.name for t in agent.tools] == ["list_specials", "price"]
    response = await agent.run("what is special and what does the pie cost?")
    assert response.text == "Pie is 6."
    results = [r.result for m in response.messages for r in m.function_results]
    assert results == [["pie", "soup"], 6]
    assert menu.asked == ["pie"]
    offered = [spec.name for spec in client.calls[0].options.tools or ()]
    assert offered == ["list_specials", "price"]


async def test_a_plugin_can_be_given_for_one_call() -> None:
    client = ScriptedChatClient([[tool_call("price", {"item": "soup"})], "4."])
    agent = ChatAgent(client, name="waiter")
    menu = MenuPlugin({"soup": 4})
    await agent.run("soup?", tools=[menu])
    assert menu.asked == ["soup"]


def test_a_plugin_class_instead_of_an_instance_says_to_make_one() -> None:
    with pytest.raises(ConfigurationError, match=r"MenuPlugin\(\.\.\.\)"):
        ChatAgent(ScriptedChatClient([]), name="waiter", tools=[MenuPlugin])


def test_an_object_without_tools_is_still_refused() -> None:
    with pytest.raises(ConfigurationError, match="@tool-marked methods"):
        ChatAgent(ScriptedChatClient([]), name="waiter", tools=[object()])
