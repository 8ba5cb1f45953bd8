"""A selector chat of three agents: the local model picks who speaks next, every turn.

The selector asks the embedded model (SmolLM2-135M) for the next speaker with a JSON
schema whose only allowed values are the participants' names; the local client turns the
schema into a grammar, so even a 135M model always names a real participant. Each routing
decision is printed with its candidates and whether a fallback was needed (never, here).

Run it with ``python examples/selector_chat.py`` in the project's venv.
"""

from __future__ import annotations

import asyncio

from cantata.agents import ChatAgent
from cantata.models import ChatOptions, LocalChatClient
from cantata.teams import GroupChat, RoutingEvent, Selector, TaskResult, TeamMessageEvent

TASK = "Plan a small picnic for four friends on Saturday."


def build(client: LocalChatClient) -> GroupChat:
    """Three specialists and a model-driven selector; 4 turns per run."""
    options = ChatOptions(max_tokens=60, temperature=0.0)
    roles = {
        "planner": "decides the time and the place",
        "cook": "decides what food to bring",
        "weather": "says what weather to expect and what to wear",
    }
    agents = [
        ChatAgent(
            client,
            name=name,
            description=role,
            instructions=f"You are the {name}: you {role}. Answer in one short sentence.",
            options=options,
        )
        for name, role in roles.items()
    ]
    return GroupChat(agents, speaker=Selector(client), max_turns=4, name="picnic")


async def main() -> tuple[TaskResult, list[RoutingEvent]]:
    async with LocalChatClient() as client:
        team = build(client)
        routes: list[RoutingEvent] = []
        result: TaskResult | None = None
        async for item in team.run_stream(TASK):
            if isinstance(item, RoutingEvent):
                routes.append(item)
                note = "fallback" if item.fallback_used else item.reason
                print(f"-> {item.choice} (among {item.candidates}; {note})", flush=True)
            elif isinstance(item, TeamMessageEvent):
                print(f"[{item.source}] {item.message.text.strip()}\n", flush=True)
            elif isinstance(item, TaskResult):
                result = item
        assert result is not None
        print(f"stopped: {result.stop_reason}")
        return result, routes


if __name__ == "__main__":
    asyncio.run(main())
