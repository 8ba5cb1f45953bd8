"""The lifecycle half of `LocalRuntime`: stop (grace, cancel, abandon), the idle and
predicate waits, and the bounds every wait of the runtime takes.

Every wait has a bound (docs/architecture.md, principle 5); where one has none, a comment
says why it cannot hang. The list, for src/cantata/runtime:

- a direct request: its `timeout` (default `default_timeout`), then `stop_grace` more if
  its handler ignores the cancellation (`engine._Call`); waiting for a busy agent's turn is
  inside it;
- a broadcast handler that suspends: `default_timeout`, then abandoned likewise;
- `wait_until_idle`, `stop_when_idle`, `stop_when`: `timeout` (default `default_timeout`);
- `stop`: `grace` to finish, `grace` to end once cancelled, then what is left is abandoned
  and the last wait is bounded by `grace` again; a second `stop`/`close` waits (shielded)
  for the first, which is bounded so;
- the runtime's own work on an agent (`get_agent`, `save_state`, `load_state`, eviction,
  `close`): the wait for its turn and each hook it calls, `default_timeout`;
- an async factory with the state it loads, each intervention: `default_timeout`;
- the eviction sweeper sleeps in a loop until `stop` cancels it; each round is bounded.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import logging
import math
from collections.abc import AsyncIterator, Callable

from ..core import CancellationToken, ConfigurationError, RuntimeStateError, TimeoutError
from ..stores import StateStore
from .context import MessageContext, _current
from .engine import Engine
from .events import DeliveryFailed

__all__ = ["DEFAULT_TIMEOUT", "Lifecycle"]

_log = logging.getLogger("cantata.runtime")

DEFAULT_TIMEOUT = 300.0
"""Seconds `LocalRuntime` waits by default (a direct request, a broadcast handler that
suspended, `wait_until_idle`, `stop_when`, an agent's turn for the runtime's own work, a
hook): generous, so that only a stuck agent reaches it. `default_timeout=None` opts out."""


def _seconds(value: object, name: str) -> float:
    """A duration option: a number of seconds, 0 or more (`math.inf`: no bound)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
        raise ConfigurationError(
            f"{name} must be a number of seconds, 0 or more (math.inf for no bound), not {value!r}"
        )
    return float(value)


class Lifecycle(Engine):
    """Stop and the bounded waits; `LocalRuntime` adds the public API around them."""

    def __init__(
        self,
        *,
        on_error: Callable[[DeliveryFailed], object] | None,
        store: StateStore | None,
        dedup_window: int,
        state_prefix: str,
        default_timeout: float | None,
        stop_grace: float,
    ) -> None:
        if default_timeout is not None:
            default_timeout = _seconds(default_timeout, "default_timeout")
        stop_grace = _seconds(stop_grace, "stop_grace")
        super().__init__(
            on_error=on_error, store=store, dedup_window=dedup_window, state_prefix=state_prefix
        )
        self._default_timeout = None if default_timeout == math.inf else default_timeout
        self._stop_grace = self._cleanup = stop_grace
        self._events_token = CancellationToken()
        self._sweeper: asyncio.Task[None] | None = None
        # Set while a stop is in progress, so a second caller waits for it.
        self._stopping: asyncio.Future[None] | None = None
        self._thresholds: list[int] = []  # of the `_wait_pending` calls in progress

    def _bound(self, timeout: float | None) -> float | None:
        """The bound of a wait given `timeout`: None is the default, `math.inf` none."""
        if timeout is None:
            return self._default_timeout
        seconds = _seconds(timeout, "timeout")
        return None if seconds == math.inf else seconds

    @contextlib.asynccontextmanager
    async def _bounded(self, what: str) -> AsyncIterator[None]:
        """Bound the runtime's wait on user code (a hook, an intervention) by
        `default_timeout`: past it, a typed `TimeoutError` naming what was waited for."""
        bound = asyncio.timeout(self._default_timeout)
        try:
            async with bound:
                yield
        except builtins.TimeoutError:
            if not bound.expired():
                raise
            raise TimeoutError(
                f"{what} took longer than the runtime's default_timeout of "
                f"{self._default_timeout}s; it was cancelled (make it faster, or raise "
                "default_timeout)"
            ) from None

    async def stop(self, grace: float | None = None) -> None:
        """Stop taking messages, let handlers in flight finish within `grace` seconds
        (default `stop_grace`), then cancel what is left. Stopping twice does nothing;
        a stop while another is in progress waits for it.

        A cancelled handler gets `grace` more seconds to end; one that ignores its
        cancellation is then abandoned (its coroutine closed) and its sender gets
        `CancelledError`, so a stop returns within about three grace periods.
        While stopping, events already queued are still handled; a handler in flight may
        still send direct requests (it waits for them to finish), but what it publishes
        is dropped, so a cascade ends. Everyone else gets `RuntimeStateError`.
        Called from inside a handler, it waits for every handler but the ones on its own
        call chain (which could not finish before it returns), cancels the others after
        the grace period, and returns to the calling handler, which then finishes its turn.
        """
        if self._state == "stopping" and self._stopping is not None:
            if _current.get() is None:  # a handler cannot wait for a stop that waits for it
                await asyncio.shield(self._stopping)  # bounded: that stop is (see above)
            return
        if self._state != "running":
            return
        bound = self._stop_grace if grace is None else _seconds(grace, "grace")
        self._state = "stopping"
        done = self._stopping = asyncio.get_running_loop().create_future()
        own = self._own_chain()
        try:
            try:
                if self._pending > len(own):
                    await self._wait_pending(len(own), bound)
            finally:  # also when this stop is itself cancelled: nothing may run on
                tasks = self._cancel_all(own)
            await self._end_cancelled(len(own), tasks, bound)
        finally:
            self._state = "stopped"
            self._stopping = None
            done.set_result(None)

    async def _end_cancelled(self, own: int, tasks: list[asyncio.Task[None]], grace: float) -> None:
        """Give what `stop` cancelled `grace` seconds to end, then abandon what is left."""
        if self._pending <= own and not tasks:
            return  # nothing was cancelled (and no await, so a stop can be atomic)
        await asyncio.sleep(0)  # even with no grace, a cancelled handler sees its cancellation
        if self._pending > own:
            await self._wait_pending(own, grace)
        current = asyncio.current_task()
        for call in [*self._calls.values(), *self._event_calls]:
            if call.task is not current:  # the caller's own chain runs on
                call.abandon()
        left = {t for t in tasks if not t.done()}
        if left:
            await asyncio.sleep(0)  # an abandoned handler ends at its next step
            _, left = await asyncio.wait(left, timeout=None if grace == math.inf else grace)
        for task in left:  # an async factory or a hook that ignores cancellation
            _log.error("runtime task %s ignored its cancellation at stop; left behind", task)

    def _own_chain(self) -> list[MessageContext]:
        """The deliveries still in flight on the caller's chain (empty outside handlers):
        the handler calling, and the ones waiting on its request, each one pending."""
        chain = []
        ctx = _current.get()
        while ctx is not None:
            if ctx.is_rpc:
                if ctx.cancellation_token in self._calls:
                    chain.append(ctx)
            elif ctx.recipient is not None:
                cell = self._cells.get(ctx.recipient)
                if cell is not None and cell.turn is ctx:
                    chain.append(ctx)
            ctx = ctx._caller
        return chain

    async def _wait_pending(self, allowed: int, bound: float | None) -> bool:
        """Wait until at most `allowed` messages are in flight (True), or `bound` seconds
        pass (False)."""
        idle = self._idle = self._idle or asyncio.Event()
        self._thresholds.append(allowed)
        self._idle_at = max(self._thresholds)
        try:
            async with asyncio.timeout(None if bound == math.inf else bound):
                while self._pending > allowed:
                    idle.clear()
                    await idle.wait()
        except builtins.TimeoutError:
            return False
        finally:
            self._thresholds.remove(allowed)
            self._idle_at = max(self._thresholds, default=0)
        return True

    def _cancel_all(self, spare: list[MessageContext]) -> list[asyncio.Task[None]]:
        """Drop queued events and cancel every handler but `spare`'s; the tasks to await."""
        # Events still queued are dropped first, so cancelled drain tasks start no more.
        for cell in self._cells.values():
            mailbox = cell.mailbox
            if mailbox:
                waiting = [item for item in mailbox if not isinstance(item, MessageContext)]
                for _ in range(len(mailbox) - len(waiting)):
                    self._done_one()
                mailbox.clear()
                mailbox.extend(waiting)
        self._events_token.cancel()
        spared = {id(ctx.cancellation_token) for ctx in spare if ctx.is_rpc}
        for token in list(self._calls):
            if id(token) not in spared:
                token.cancel()
        current = asyncio.current_task()
        tasks = [t for t in self._tasks if not t.done() and t is not current]
        if self._sweeper is not None:
            if self._sweeper is not current:
                tasks.append(self._sweeper)
            self._sweeper = None
        for task in tasks:
            task.cancel()
        for _, future in self._predicates:
            if not future.done():
                future.set_exception(RuntimeStateError("the runtime stopped first"))
        return tasks

    async def wait_until_idle(self, *, timeout: float | None = None) -> None:  # noqa: ASYNC109
        """Wait until no message is queued or being handled (cascades included); the
        runtime keeps running, so this suits step-by-step drivers such as workflows.

        Called from inside a handler, it waits for everything but that handler's own
        call chain (which cannot finish while it waits). Bounded by `timeout` (default:
        the runtime's `default_timeout`; `math.inf` for none): past it, `TimeoutError`
        naming the agents still busy, and the runtime keeps running.
        """
        if self._state not in ("running", "stopping"):
            raise RuntimeStateError(
                f"wait_until_idle needs a running runtime (it is {self._state})"
            )
        own = len(self._own_chain()) if _current.get() is not None else 0
        if self._pending > own:
            bound = self._bound(timeout)
            if not await self._wait_pending(own, bound):
                raise TimeoutError(
                    f"the runtime was still busy after {bound}s: {self._pending - own} "
                    f"message(s) in flight, busy agents {self._busy_agents()}; a handler may "
                    "be stuck (or pass a larger timeout)"
                )

    def _busy_agents(self, limit: int = 5) -> list[str]:
        busy = [str(agent_id) for agent_id, cell in self._cells.items() if cell.busy]
        return busy[:limit] + ([f"... {len(busy) - limit} more"] if len(busy) > limit else [])

    async def stop_when_idle(self, *, timeout: float | None = None) -> None:  # noqa: ASYNC109
        """Wait until no message is queued or being handled (cascades included), then stop.
        From inside a handler, its own call chain does not count (see `wait_until_idle`,
        also for `timeout`; after a timeout the runtime keeps running)."""
        if self._state != "running":
            raise RuntimeStateError(f"stop_when_idle needs a running runtime (it is {self._state})")
        await self.wait_until_idle(timeout=timeout)
        await self.stop()

    async def stop_when(
        self,
        predicate: Callable[[], bool],
        *,
        timeout: float | None = None,  # noqa: ASYNC109
    ) -> None:
        """Stop once `predicate()` is true; it is checked after every handled message.

        Bounded by `timeout` (default: the runtime's `default_timeout`; `math.inf` for
        none): past it, `TimeoutError`, and the runtime keeps running.
        """
        if self._state != "running":
            raise RuntimeStateError(f"stop_when needs a running runtime (it is {self._state})")
        if not predicate():
            bound = self._bound(timeout)
            future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            entry = (predicate, future)
            self._predicates.append(entry)
            limit = asyncio.timeout(bound)
            try:
                async with limit:
                    await future
            except builtins.TimeoutError:
                if limit.expired():
                    raise TimeoutError(
                        f"stop_when: {getattr(predicate, '__qualname__', predicate)} was still "
                        f"false after {bound}s; the runtime keeps running (stop it, or pass "
                        "a larger timeout)"
                    ) from None
                raise
            finally:
                if entry in self._predicates:
                    self._predicates.remove(entry)
        await self.stop()
