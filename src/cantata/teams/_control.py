"""`RunControl`: what a session tells its running team from another task: pause, resume,
stop after the turn under way.

The session hands it to its manager as a run keyword argument (in process: an object, not
data, so it is never checkpointed). The manager looks at it at every turn boundary, where
it also gives the event loop its turn when its time slice is over (`SLICE`): so a team
whose agents never suspend does not starve the other tasks of the process, and a pause, a
`stop()` or a cancellation token set by another task takes effect at the next turn. A
pause holds the run at the boundary: the turn under way finishes and is committed (and
checkpointed, with a store), the next one waits, and `resume` lets the same run go on.
Nothing is in flight while it waits, so a process that dies then resumes from the
checkpoint as from any other.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Sequence
from time import perf_counter
from typing import TYPE_CHECKING

from ..core import CancellationToken

if TYPE_CHECKING:
    from ..agents import Agent

__all__ = ["CONTROL_KEY", "SLICE", "RunControl", "tell"]

CONTROL_KEY = "cantata.teams.control"
"""The run keyword argument that carries the session's `RunControl` to its manager."""
SLICE = 0.001
"""Seconds a run's turns may go on without giving the event loop its turn. A yield costs
a pass of the loop (a few microseconds, more on a busy machine): at every turn of agents
that answer at once that was 10 to 20% of a turn, so a run yields at its first turn
boundary and then at the first boundary after each slice. Another task waits at most a
slice and a turn; what it sets (a cancellation, a pause, a stop) lands at the next turn."""


class RunControl:
    """Pause, resume and stop requests for the runs of one session."""

    __slots__ = ("_resumed", "_until", "paused", "stopping")

    def __init__(self) -> None:
        self._until = 0.0
        """When the current slice ends (see `SLICE`)."""
        self.paused = False
        self.stopping = False
        """Set by `TeamSession.stop()` for the run under way; cleared when it ends."""
        self._resumed: asyncio.Event | None = None

    def begin(self) -> None:
        """A run starts: its first turn boundary yields."""
        self._until = 0.0

    def due(self) -> bool:
        """Whether the run must give the event loop its turn now (its slice is over, or a
        pause or stop was asked: only a due boundary looks at them); when it is, the next
        slice starts."""
        now = perf_counter()
        if now < self._until:
            return False
        self._until = now + SLICE
        return True

    def pause(self) -> None:
        """Hold the runs at their next turn boundary until `resume`."""
        self.paused = True
        self._until = 0.0  # the next boundary is due: it is where the run waits

    def resume(self) -> None:
        """Let held runs go on."""
        self.paused = False
        if self._resumed is not None:
            self._resumed.set()
            self._resumed = None

    def stop(self) -> None:
        """Stop the run under way at its next turn boundary (a held one too)."""
        self.stopping = True
        self._until = 0.0
        if self._resumed is not None:
            self._resumed.set()
            self._resumed = None

    async def wait(self, token: CancellationToken) -> None:
        """Wait at a turn boundary while paused (a stop or the run's cancellation ends the
        wait; the manager then stops or the run is cancelled)."""
        while self.paused and not self.stopping:
            token.raise_if_cancelled()
            if self._resumed is None:
                self._resumed = asyncio.Event()
            waiter = asyncio.ensure_future(self._resumed.wait())
            token.link_future(waiter)
            try:
                await waiter
            except asyncio.CancelledError:
                token.raise_if_cancelled()  # the run's token: a cancelled run
                raise  # the run's own task was cancelled


async def tell(participants: Sequence[Agent], hook: str) -> None:
    """Await `hook` (``on_pause``, ``on_resume``) on every participant that has one."""
    for agent in participants:
        method = getattr(agent, hook, None)
        if callable(method):
            answer = method()
            if inspect.isawaitable(answer):
                await answer
