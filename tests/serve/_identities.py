"""What the identity tests serve in a `cantata serve` subprocess: the turn-counting echo
agent (a conversation's history shows in its answer), the refund agent whose tool waits
for an approval, the payout workflow that asks a person (a dev UI run that waits), and a
keeper agent with long-term memory (``remember: <fact>`` stores it, ``recall`` lists what
it finds) in the item store named by ``IDENT_MEMORY_URL``."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from cantata.agents import ChatAgent, Memory, memory_tools
from cantata.core import Message
from cantata.models import ChatOptions, ScriptedChatClient, ScriptedTurn, tool_call
from cantata.models.embeddings import HashEmbeddingClient
from cantata.stores import open_item_store

sys.path.insert(0, str(Path(__file__).parent))  # loaded by path: its neighbours by name
from _refunds import make_support, make_workflow
from _servers import echo_agent


def _keeper(messages: list[Message], options: ChatOptions) -> ScriptedTurn:
    last = messages[-1]
    if last.role == "tool":
        return f"keeper: {last.function_results[0].result}"
    text = last.text
    if text.startswith("remember: "):
        return [tool_call("remember", {"fact": text[len("remember: ") :]})]
    return [tool_call("recall", {"query": "secret"})]


def make_keeper() -> ChatAgent:
    store = open_item_store(os.environ.get("IDENT_MEMORY_URL", "memory://"), dimensions=64)
    scope = ("facts", os.environ.get("IDENT_RUN", "any"))  # one test run's, on a shared store
    memory = Memory(store, HashEmbeddingClient(64), scope=scope)
    tools = memory_tools(memory, limit=50)
    return ChatAgent(ScriptedChatClient(_keeper), name="keeper", tools=tools)


served: dict[str, Any] = {
    "echo": echo_agent(),
    "support": make_support(),
    "payout": make_workflow(),
    "keeper": make_keeper(),
}
