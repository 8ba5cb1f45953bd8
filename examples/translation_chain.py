"""Translation chain: a writer, then French, Spanish and back to English, streamed live.

Four agents in a workflow chain. The writer writes two sentences on a topic; each
translator gets only the previous agent's reply (``context_mode="last_agent"``) and
translates it. The run is streamed: every token of every agent is printed as it is
produced, under the name of the agent producing it.

Run it on the embedded model (SmolLM2-135M, offline) with
``python examples/translation_chain.py``, or give a topic:
``python examples/translation_chain.py "the sea at night"``. A model that small translates
poorly; the point is the workflow, which runs the same on any `ChatClient`.
"""

from __future__ import annotations

import asyncio
import sys

from cantata.agents import ChatAgent
from cantata.models import ChatClient, ChatOptions
from cantata.workflows import (
    AgentExecutor,
    AgentUpdateEvent,
    OutputEvent,
    Workflow,
    WorkflowBuilder,
)

LANGUAGES = [("french", "French"), ("spanish", "Spanish"), ("english", "English")]


def build_workflow(client: ChatClient, *, max_tokens: int = 80) -> Workflow:
    """writer -> french -> spanish -> english; the last agent, having no out-edge, answers
    the run: its response is the workflow's output."""
    options = ChatOptions(max_tokens=max_tokens, temperature=0.2)
    writer = ChatAgent(
        client,
        name="writer",
        instructions="You write two short, simple sentences in English about the topic given.",
        options=options,
    )
    steps = [AgentExecutor(writer)]
    for name, language in LANGUAGES:
        translator = ChatAgent(
            client,
            name=name,
            instructions=(
                f"Translate the user's text into {language}. Answer with the translation only."
            ),
            options=options,
        )
        steps.append(AgentExecutor(translator, context_mode="last_agent"))
    return WorkflowBuilder(steps[0], name="translation-chain").add_chain(steps).build()


async def translate(topic: str, client: ChatClient, *, out: object = sys.stdout) -> str:
    """Run the chain on `topic`, printing each agent's tokens as they stream; returns the
    final English text."""
    write = out.write  # type: ignore[attr-defined]
    flush = getattr(out, "flush", lambda: None)
    speaking: str | None = None
    final = ""
    stream = build_workflow(client).run_stream(topic)
    async for event in stream:
        if isinstance(event, AgentUpdateEvent):
            if event.executor_id != speaking:
                speaking = event.executor_id
                write(f"\n[{speaking}] ")
            write(event.data.text)
            flush()
        elif isinstance(event, OutputEvent):
            final = event.data.text
    write("\n")
    return final


def main() -> None:
    from cantata.models import LocalChatClient

    topic = sys.argv[1] if len(sys.argv) > 1 else "a cat who learns to play the piano"
    print(f"topic: {topic}")
    asyncio.run(translate(topic, LocalChatClient()))


if __name__ == "__main__":
    main()
