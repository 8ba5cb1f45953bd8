"""Handoff triage: a front desk hands the conversation to a specialist, who answers.

A `Handoff` team (a swarm): the triage agent is offered ``transfer_to_billing`` and
``transfer_to_tech_support`` tools; calling one passes the conversation (the one shared
history, plus a short summary) to that specialist. The specialist looks the answer up with
its own tool and replies; since it hands off to nobody, the team then asks the user, and
the run ends there (a later ``team.run("...")`` would go back to the specialist).

On the embedded model (SmolLM2-135M) the handoff is reliable because its output is
grammar-constrained: with ``tool_choice="required"`` the triage agent can only answer with
a call of one of its transfer tools.

    python examples/handoff_triage.py "How much is invoice INV-7?"
"""

from __future__ import annotations

import asyncio
import sys
from typing import Literal

from cantata.agents import ChatAgent
from cantata.models import ChatClient, ChatOptions
from cantata.teams.events import RoutingEvent
from cantata.teams.handoff import Handoff, handoff_of
from cantata.teams.result import TaskResult
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


def build_team(client: ChatClient) -> Handoff:
    """Triage and two specialists; only triage hands off."""
    # The first request of each run must call a tool (the loop relaxes it afterwards).
    options = ChatOptions(temperature=0.0, max_tokens=160, tool_choice="required")
    triage = ChatAgent(
        client,
        name="triage",
        instructions="You are the front desk. Hand the user to the right specialist.",
        options=options,
    )
    billing = ChatAgent(
        client,
        name="billing",
        description="invoices, payments and refunds",
        instructions="You are the billing specialist. Use lookup_invoice, then answer briefly.",
        tools=[lookup_invoice],
        options=options,
    )
    tech = ChatAgent(
        client,
        name="tech_support",
        description="outages and services such as email and VPN",
        instructions="You are the tech support specialist. Use service_status, then answer.",
        tools=[service_status],
        options=options,
    )
    return Handoff(
        [triage, billing, tech],
        handoffs={"triage": ["billing", "tech_support"]},
        max_turns=6,
    )


async def main(question: str, client: ChatClient | None = None) -> TaskResult:
    """Run the team on one question; prints every routing decision and the transcript."""
    if client is None:
        from cantata.models import LocalChatClient

        client = LocalChatClient()
    team = build_team(client)
    result: TaskResult | None = None
    async for item in team.run_stream(question):
        if isinstance(item, RoutingEvent):
            print(f"  -> {item.choice} ({item.reason})")
        elif isinstance(item, TaskResult):
            result = item
    assert result is not None  # run_stream always ends with the result
    for message in result.messages:
        handoff = handoff_of(message)
        label = "handoff" if handoff else message.author_name
        print(f"{label}: {message.text}")
    print(f"[stopped: {result.stop_reason}]")
    return result


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "How much is invoice INV-7?"))
