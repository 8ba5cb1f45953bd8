"""A runtime agent to kill: python actor_child.py DB [--no-commit].

Handles one Charge (message id ``pay-1``) on a LocalRuntime over SQLite, commits its state
with the message id (unless --no-commit), prints ``handled``, then waits to be killed.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cantata.runtime import AgentId, LocalRuntime, MessageContext, RoutedAgent, message_handler
from cantata.stores import SQLiteStore


@dataclass
class Charge:
    cents: int


class Billing(RoutedAgent):
    """Charges once per message id, across crashes when it commits."""

    commit = True

    def __init__(self) -> None:
        self.charged = 0

    @message_handler
    async def on_charge(self, message: Charge, ctx: MessageContext) -> int:
        if ctx.is_redelivery:
            return self.charged
        self.charged += message.cents
        if self.commit:
            await self.commit_state()
        return self.charged

    async def save_state(self) -> Mapping[str, Any]:
        return {"charged": self.charged}

    async def load_state(self, state: Mapping[str, Any]) -> None:
        self.charged = state["charged"]


async def main(path: str, commit: bool) -> None:
    Billing.commit = commit
    runtime = LocalRuntime(store=SQLiteStore(path))
    await runtime.register_factory("billing", Billing)
    await runtime.start()
    await runtime.send_message(Charge(100), AgentId("billing", "a"), message_id="pay-1")
    print("handled", flush=True)
    await asyncio.sleep(60)  # the harness kills this process long before


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], "--no-commit" not in sys.argv))
