"""A durable, traced workflow: an effect journaled once, a tool-calling agent, and every
span printed to the console (OpenTelemetry's ConsoleSpanExporter).

    python examples/durable_traced.py [STORE.db]

Run it twice with the same STORE.db: the second run resumes the finished run from its
last checkpoint, and neither the payment nor the model is asked again.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor

from cantata.agents import ChatAgent
from cantata.core import Message, tracing
from cantata.models import ScriptedChatClient, tool_call
from cantata.stores import SQLiteStore
from cantata.tools import tool
from cantata.workflows import StateStoreCheckpointStore, WorkflowBuilder, WorkflowContext, executor


@tool(effect=True)
def send_receipt(amount: int) -> str:
    """Email the customer a receipt (a side effect: journaled by call id)."""
    print(f"-- sending a receipt for {amount}")
    return f"receipt for {amount} sent"


def model(messages: list[Message], options: object) -> object:
    """A scripted model: asks for the receipt tool, then answers."""
    if messages[-1].role != "tool":
        return Message("assistant", [tool_call("send_receipt", {"amount": 42})])
    return "Paid 42 and sent the receipt."


def charge_card(amount: int, *, idempotency_key: str) -> str:
    """The outside payment call; the key lets the payment service drop a repeat."""
    print(f"-- charging {amount} (idempotency key {idempotency_key})")
    return f"charged {amount}"


@executor
async def pay(order: str, ctx: WorkflowContext[str]) -> None:
    charged = await ctx.effect("charge", charge_card, 42)
    ctx.send_message(f"{order}: {charged}; tell the customer")


async def main(path: Path) -> None:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter()))
    tracing.configure(provider)
    clerk = ChatAgent(ScriptedChatClient(model), name="clerk", tools=[send_receipt])
    workflow = WorkflowBuilder(pay, name="checkout").add_edge(pay, clerk).build()
    store = StateStoreCheckpointStore(SQLiteStore(path))
    try:
        found = await store.list_checkpoints(run_id="order-1")
        if found:
            result = await workflow.resume(found[-1].checkpoint_id, checkpoint_store=store)
        else:
            result = await workflow.run("order-1", checkpoint_store=store, run_id="order-1")
        print([r.text for r in result.outputs])
    finally:
        await store.close()
        tracing.configure(False)
        provider.shutdown()


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        where = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tmp) / "checkout.db"
        asyncio.run(main(where))
