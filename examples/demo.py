"""The main job, end to end, offline: an agent with a tool, a durable thread, a workflow.

1. A `ChatAgent` on the embedded model (SmolLM2-135M, shipped in a package; nothing is
   downloaded) looks up the weather with a tool and streams its answer.
2. Its conversation lives in a thread stored in SQLite. The thread is serialized to JSON
   (a reference to the log, not the messages), restored through a fresh store handle, and
   the conversation continues where it stopped.
3. A workflow of two agents (a writer, then an editor) streams every token as it is made.

Run it with ``make demo`` (or ``python examples/demo.py`` in the project's venv). A
135M-parameter model writes clumsy prose; the machinery is the point, and it runs the same
on any OpenAI-compatible server (`OpenAIChatClient`).
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from pathlib import Path

from cantata.agents import ChatAgent, StateStoreMessageStore
from cantata.models import ChatClient, ChatOptions, LocalChatClient
from cantata.stores import SQLiteStore
from cantata.tools import tool
from cantata.workflows import AgentExecutor, AgentUpdateEvent, WorkflowBuilder

FORECASTS = {"paris": "sunny, 21 C", "oslo": "snow, -4 C", "lima": "cloudy, 17 C"}


@tool
def get_weather(city: str) -> str:
    """Today's weather in a city."""
    return FORECASTS.get(city.strip().lower(), "no forecast for that city")


def _print(text: str) -> None:
    print(text, end="", flush=True)


async def agent_with_a_durable_thread(client: ChatClient, db: Path) -> None:
    print("== 1. an agent with a tool, streaming ==")
    store = SQLiteStore(db)
    agent = ChatAgent(
        client,
        name="forecaster",
        instructions="You are a weather assistant. Answer in one short sentence.",
        tools=[get_weather],
        # A 135M model rarely decides to call a tool on its own: the first request of a
        # run must call one; the function loop relaxes it to "auto" afterwards.
        options=ChatOptions(tool_choice="required", max_tokens=60, temperature=0.0),
        message_store_factory=StateStoreMessageStore.factory(store),
    )
    stream = agent.run_stream("What is the weather in Oslo today?")
    async for update in stream:
        _print(update.text)
    response = stream.response
    assert response is not None
    for message in response.messages:
        for call in message.function_calls:
            print(f"\n  (tool call: {call.name}({json.dumps(call.arguments)}))")
        for result in message.function_results:
            print(f"  (tool result: {result.result})")

    print("\n== 2. the thread, serialized, restored, continued ==")
    saved = json.dumps(await response.thread.serialize())
    print(f"  serialized thread: {saved}")
    await store.close()

    reopened = SQLiteStore(db)
    agent = ChatAgent(
        client,
        name="forecaster",
        instructions="You are a weather assistant. Answer in one short sentence.",
        tools=[get_weather],
        options=ChatOptions(max_tokens=60, temperature=0.0),
        message_store_factory=StateStoreMessageStore.factory(reopened),
    )
    thread = await agent.deserialize_thread(saved)
    print(f"  restored {len(await thread.get_messages())} messages from SQLite")
    stream = agent.run_stream("Should I wear a warm coat there?", thread=thread)
    async for update in stream:
        _print(update.text)
    print(f"\n  the thread now holds {len(await thread.get_messages())} messages")
    await reopened.close()


async def writer_then_editor(client: ChatClient) -> None:
    print("\n== 3. a workflow: writer -> editor, every token streamed ==")
    options = ChatOptions(max_tokens=60, temperature=0.2)
    writer = ChatAgent(
        client,
        name="writer",
        instructions="Write two short sentences about the topic.",
        options=options,
    )
    editor = ChatAgent(
        client,
        name="editor",
        instructions="Rewrite the text you are given as one short, clear sentence.",
        options=options,
    )
    write = AgentExecutor(writer)
    edit = AgentExecutor(editor, context_mode="last_agent", output_response=True)
    workflow = WorkflowBuilder(write, name="writer-editor").add_edge(write, edit).build()
    speaking: str | None = None
    async for event in workflow.run_stream("a lighthouse keeper in winter"):
        if isinstance(event, AgentUpdateEvent):
            if event.executor_id != speaking:
                speaking = event.executor_id
                print(f"\n[{speaking}] ", end="")
            _print(event.data.text)
    print()


async def main() -> None:
    client = LocalChatClient()
    with tempfile.TemporaryDirectory() as tmp:
        await agent_with_a_durable_thread(client, Path(tmp) / "threads.db")
    await writer_then_editor(client)


if __name__ == "__main__":
    asyncio.run(main())
