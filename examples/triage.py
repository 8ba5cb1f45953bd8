"""Triage: a front-desk agent that hands questions to two specialist agents used as tools.

The triage agent sees the specialists as two tools (``billing`` and ``tech_support``),
made with ``agent.as_tool()``. Each specialist is an agent of its own, with its own
instructions and its own tool; it runs on a fresh thread for every question it gets.
Every tool call and result is printed as it happens.

Run it on the embedded model (SmolLM2-135M, offline) with ``python examples/triage.py``,
or pass a question: ``python examples/triage.py "My invoice INV-7 is wrong"``.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Literal

from cantata.agents import ChatAgent
from cantata.core import Message
from cantata.models import ChatClient, ChatOptions
from cantata.tools import tool

INVOICES = {"INV-7": "49.00 EUR, paid on 2026-11-02", "INV-8": "12.50 EUR, unpaid"}
SERVICES = {"email": "operational", "vpn": "degraded: high latency in eu-west"}


@tool
def lookup_invoice(invoice_id: Literal["INV-7", "INV-8"]) -> str:
    """The amount and payment state of an invoice, by its id."""
    return INVOICES[invoice_id]


@tool
def service_status(service: Literal["email", "vpn"]) -> str:
    """The current status of a service."""
    return SERVICES[service]


def build_agents(client: ChatClient) -> ChatAgent:
    """The triage agent, with the two specialists as its tools."""
    # A tiny model answers from its own head unless told to consult first: the first
    # request of each run must call a tool; later ones may answer (the loop relaxes it).
    options = ChatOptions(temperature=0.0, max_tokens=80, tool_choice="required")
    billing = ChatAgent(
        client,
        name="billing",
        description="Answers questions about invoices, payments and refunds.",
        instructions="You are the billing specialist. Use lookup_invoice, then answer briefly.",
        tools=[lookup_invoice],
        options=options,
    )
    tech = ChatAgent(
        client,
        name="tech_support",
        description="Answers questions about outages and services such as email and VPN.",
        instructions="You are the tech support specialist. Use service_status, then answer.",
        tools=[service_status],
        options=options,
    )
    return ChatAgent(
        client,
        name="triage",
        instructions=(
            "You are the front desk of {{ company }}. Send billing questions to the billing "
            "tool and technical questions to the tech_support tool, then tell the user "
            "the specialist's answer."
        ),
        arguments={"company": "Acme"},
        tools=[billing, tech],
        options=options,
    )


def _show(message: Message) -> None:
    for call in message.function_calls:
        print(f"  [{message.author_name}] calls {call.name}({call.arguments})")
    for result in message.function_results:
        shown = result.error if result.is_error else result.result
        print(f"  [{message.author_name}] result: {shown}")


async def main(question: str, client: ChatClient | None = None) -> str:
    """Ask the triage agent one question; returns its answer."""
    if client is None:
        from cantata.models import LocalChatClient

        client = LocalChatClient()
    triage = build_agents(client)
    print(f"user: {question}")
    response = await triage.run(question, on_intermediate=_show)
    print(f"triage: {response.text}")
    return response.text


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "Is the VPN down right now?"))
