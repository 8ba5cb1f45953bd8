"""The runtime's record of one live agent: its instance, turn and mailbox.

Why so small: a runtime may hold millions of keyed agents, most of them idle, so an idle
agent costs one slotted object and no task, queue or future. The mailbox exists only
while messages wait for the agent's turn.
"""

from __future__ import annotations

import asyncio
from collections import deque

from .agent import BaseAgent
from .context import MessageContext

__all__: list[str] = []

# A mailbox holds broadcast deliveries as publications (a `MessageContext` carrying its
# `_message`: one object shared by every subscriber's mailbox, or a copy per subscriber
# when messages are serialized), and direct requests as the future their sender waits on
# for its turn (the sender then runs the handler itself).
Item = MessageContext | asyncio.Future[None]


class Cell:
    """One agent's instance (None while it is being created), turn flag and mailbox."""

    __slots__ = ("agent", "busy", "doomed", "handled", "last_used", "mailbox", "turn")

    def __init__(self, agent: BaseAgent | None) -> None:
        self.agent = agent
        self.busy = False
        # The message whose handler holds the turn (None when idle, or when the turn is
        # held to save, load or evict): only its own call chain may re-enter the agent.
        self.turn: MessageContext | None = None
        self.mailbox: deque[Item] | None = None
        # Recent handled message ids: None, one id, or an ordered dict used as a window
        # (at least `window` ids; trimmed in batches, see `remember`).
        self.handled: str | dict[str, None] | None = None
        self.last_used = 0.0
        # Released while busy (`LocalRuntime.release_agents`): leaves the table, unsaved,
        # once its turn ends and nothing waits for it.
        self.doomed = False

    def seen(self, message_id: str) -> bool:
        """Whether this agent handled `message_id` within its window."""
        handled = self.handled
        if handled is None:
            return False
        if type(handled) is str:
            return handled == message_id
        return message_id in handled

    def remember(self, message_id: str, window: int) -> None:
        """Record a handled id, keeping at least the last `window`.

        The dict grows to half a window more, then keeps only its last `window` ids: one
        rebuild every `window // 2` messages instead of deleting the oldest id on each
        (deleting from the front leaves holes that `next(iter(...))` walks over).
        """
        handled = self.handled
        if handled is None:
            self.handled = message_id
        elif isinstance(handled, str):
            if handled != message_id and window > 1:
                self.handled = {handled: None, message_id: None}
        else:
            handled[message_id] = None
            if len(handled) > window + (window >> 1):
                self.trim(window)

    def trim(self, window: int) -> None:
        """Keep only the last `window` handled ids."""
        handled = self.handled
        if isinstance(handled, dict) and len(handled) > window:
            self.handled = dict.fromkeys(list(handled)[-window:])

    def restore_handled(self, ids: list[str], window: int) -> None:
        """Reset the window to the last `window` of `ids` (from saved state)."""
        self.handled = None
        for message_id in ids[-window:] if window else ():
            self.remember(message_id, window)
