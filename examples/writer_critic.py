"""A writer and a critic take turns until the critic writes APPROVE, or 8 messages.

Round robin on the embedded model (SmolLM2-135M, shipped in a package: nothing is
downloaded, nothing leaves the machine). Each message is printed as it joins the
transcript, then why the run stopped. A 135M model is a clumsy poet and a lenient or
stubborn critic; the team machinery is the point, and it runs the same on any
OpenAI-compatible server (`OpenAIChatClient`).

Run it with ``python examples/writer_critic.py`` in the project's venv.
"""

from __future__ import annotations

import asyncio

from cantata.agents import ChatAgent
from cantata.models import ChatOptions, LocalChatClient
from cantata.teams import GroupChat, MaxMessage, TaskResult, TeamMessageEvent, TextMention

TASK = "Write a four-line poem about the sea."


def build(client: LocalChatClient) -> GroupChat:
    """The team: a writer, a critic, round robin, stop on APPROVE or after 8 messages."""
    options = ChatOptions(max_tokens=60, temperature=0.0)
    writer = ChatAgent(
        client,
        name="writer",
        description="writes and revises the poem",
        instructions="You are a poet. Write or revise the poem. Reply with the poem only.",
        options=options,
    )
    critic = ChatAgent(
        client,
        name="critic",
        description="reviews the poem",
        instructions=(
            "You review poems. If the poem has four lines about the sea, reply APPROVE. "
            "Otherwise give one short suggestion."
        ),
        options=options,
    )
    return GroupChat(
        [writer, critic], termination=TextMention("APPROVE", sources=["critic"]) | MaxMessage(8)
    )


async def main() -> TaskResult:
    async with LocalChatClient() as client:
        team = build(client)
        result: TaskResult | None = None
        async for item in team.run_stream(TASK):
            if isinstance(item, TeamMessageEvent):
                print(f"[{item.source}] {item.message.text.strip()}\n", flush=True)
            elif isinstance(item, TaskResult):
                result = item
        assert result is not None
        print(f"stopped: {result.stop_reason}")
        return result


if __name__ == "__main__":
    asyncio.run(main())
