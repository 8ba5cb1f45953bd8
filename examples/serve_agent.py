"""An agent to serve: ``cantata serve examples/serve_agent.py:agent``.

It runs on the embedded model (SmolLM2-135M, offline; loaded on the first request). Then
call it as a model named ``assistant``: with curl on ``/v1/chat/completions``, or with the
``openai`` client (``base_url="http://127.0.0.1:8000/v1"``), or from another cantata agent
with ``ResponsesAgent("http://127.0.0.1:8000/v1", model="assistant")``.
"""

from __future__ import annotations

from cantata.agents import ChatAgent
from cantata.models import ChatClient, ChatOptions, LocalChatClient


def build_agent(client: ChatClient) -> ChatAgent:
    """The served agent on any chat client (tests pass a scripted one)."""
    return ChatAgent(
        client,
        name="assistant",
        description="A brief, friendly assistant.",
        instructions="You are a helpful assistant. Answer in one or two sentences.",
        options=ChatOptions(temperature=0.0, max_tokens=120),
    )


agent = build_agent(LocalChatClient())
