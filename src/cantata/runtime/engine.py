"""The delivery engine under `LocalRuntime`: turns, mailboxes and lazy activation.

How it stays fast: a direct request to an idle agent runs the handler in the sender's
own task (no queue, no task, no future); only when the agent is busy does the sender wait
in the agent's mailbox for its turn. Broadcast events go to a per-agent mailbox drained
by a task that exists only while the mailbox is non-empty. An idle agent is one small
record (`Cell`) and its instance.

How it stays correct: every handler runs in its own copy of its sender's (or
publisher's) context, stepped by `_resume` in whatever task runs it, so contextvars never
leak between turns; a busy agent is re-entered only by the call chain of the turn in
progress (`cell.turn`), so everything else keeps its arrival order.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import inspect
import logging
import time
import types
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, Generator
from contextvars import Context, copy_context
from typing import Any, Literal, cast

from ..core import (
    CancellationToken,
    CancelledError,
    ConfigurationError,
    RuntimeStateError,
    TimeoutError,
    Undeliverable,
    tracing,
)
from ..stores import StateStore
from .agent import BaseAgent
from .cell import Cell
from .context import MessageContext, _current, _start_process
from .events import AgentActivated, AgentReleased, DeliveryFailed, RuntimeEvent
from .ids import AgentId
from .protocol import AgentFactory, AgentRuntime
from .state import decode_agent, encode_agent, handled_ids, restore

__all__: list[str] = []

_log = logging.getLogger("cantata.runtime")
State = Literal["new", "running", "stopping", "stopped", "closed"]


class _Call:
    """Book-keeping of one handler run the runtime may cancel: a direct request (in its
    sender's task) or a broadcast handler that suspended (in its drain task).

    Cancelling (by the request's token, a timeout or a stop) cancels the task where the
    handler runs. A handler that swallows that cancellation would keep its sender waiting
    forever, so `cleanup` seconds later it is abandoned: the task is cancelled again with
    this call as the cancellation's message, which the `_resume` stepping this handler
    answers by closing the handler's coroutine (a `_resume` further up the same task passes
    it on, so only this handler ends), and the sender gets the runtime's error.
    """

    __slots__ = (
        "abandoned",
        "active",
        "cancels",
        "cleanup",
        "deadline",
        "expiry",
        "loop",
        "task",
        "timed_out",
        "timer",
    )

    def __init__(
        self, task: asyncio.Task[Any], loop: asyncio.AbstractEventLoop, cleanup: float
    ) -> None:
        self.task = task
        self.loop = loop
        self.cleanup = cleanup
        self.active = True
        self.cancels = 0
        self.timed_out = False
        self.abandoned = False
        self.timer: asyncio.TimerHandle | None = None  # abandons, once cancelled
        # A request's timeout: the loop time it ends at, and its timer, armed only once
        # the handler suspends (one that runs through costs no timer: no timer could
        # interrupt it anyway).
        self.deadline: float | None = None
        self.expiry: asyncio.TimerHandle | None = None

    def on_cancel(self) -> None:
        """Token callback: cancel the handler's task on the loop."""
        # The token may be cancelled from another thread or from the handler itself; the
        # actual cancel runs on the loop, and only while the request is still in flight.
        self.loop.call_soon_threadsafe(self._fire)

    def expire(self) -> None:
        """Timer callback: the handler ran past its timeout."""
        self.timed_out = True
        self._fire()

    def _fire(self) -> None:
        if self.active:
            self.cancels += 1
            self.task.cancel()
            if self.timer is None:
                self.timer = self.loop.call_later(self.cleanup, self.abandon)

    def abandon(self) -> None:
        """Give up on a handler that did not end after its cancellation."""
        if self.active and not self.abandoned:
            self.abandoned = True
            self.cancels += 1
            self.task.cancel(self)

    def arm(self, token: CancellationToken) -> None:
        """The handler is about to suspend: start its timeout (cancelling `token`)."""
        if self.deadline is not None and self.expiry is None:
            self.expiry = self.loop.call_at(self.deadline, self._expire, token)

    def _expire(self, token: CancellationToken) -> None:
        self.timed_out = True
        token.cancel()  # the handler sees its token cancelled, then the task is cancelled

    def end(self) -> None:
        """The handler ended: no more cancelling; undo the task's cancel requests."""
        self.active = False
        if self.timer is not None:
            self.timer.cancel()
        if self.expiry is not None:
            self.expiry.cancel()
        for _ in range(self.cancels):
            self.task.uncancel()
        self.cancels = 0

    def __repr__(self) -> str:  # the abandoning cancellation's message
        return "cantata: the handler ignored its cancellation and was abandoned"


def _within(ctx: MessageContext, turn: MessageContext) -> bool:
    """Whether the request `ctx` was sent, directly or down a chain of requests, by the
    handler of `turn`: that handler is waiting on it, so queueing it would deadlock.

    Only the turn's own chain may re-enter; a request from anywhere else, including a
    task an earlier turn left behind, waits for its turn.
    """
    return _holds(ctx._caller, turn)


def _holds(ctx: MessageContext | None, turn: MessageContext) -> bool:
    """Whether `ctx` is `turn` or a request down `turn`'s chain of requests."""
    while ctx is not None:
        if ctx is turn:
            return True
        ctx = ctx._caller
    return False


def _steps(awaitable: Awaitable[Any]) -> Any:
    """The coroutine (or iterator) to step a handler's awaitable with."""
    if type(awaitable) is types.CoroutineType or hasattr(awaitable, "send"):
        return awaitable
    return awaitable.__await__()


@types.coroutine
def _resume(coro: Any, context: Context, step: Any, call: _Call | None) -> Generator[Any, Any, Any]:
    """Go on awaiting `coro` (which yielded `step`) in the current task, each further step
    inside `context`.

    What `asyncio.create_task(coro, context=...)` does, without the task: a handler
    keeps running in its sender's task (cancelling that task cancels it), but its
    contextvars are its own. The first step runs inline in the caller (see `_run`), so a
    handler that never suspends costs no generator. `call` is the handler's `_Call`.
    """
    run = context.run
    while True:
        try:
            value = yield step
        except GeneratorExit:
            coro.close()
            raise
        except BaseException as exc:  # cancellation and the like go on into the handler
            if call is not None and exc.args and exc.args[0] is call:
                _close(coro)  # abandoned (see `_Call`)
                raise
            try:
                step = run(coro.throw, exc)
            except StopIteration as stop:
                return stop.value
            continue
        try:
            step = run(coro.send, value)
        except StopIteration as stop:
            return stop.value


def _close(coro: Any) -> None:
    """Close an abandoned handler's coroutine (its `finally` blocks run, up to an await)."""
    try:
        coro.close()
    except Exception:  # it awaited or raised while closing: nothing more can be done
        _log.warning("an abandoned handler did not close cleanly", exc_info=True)


class Engine:
    """Delivers messages to agents one turn at a time; `LocalRuntime` adds the public API."""

    def __init__(
        self,
        *,
        on_error: Callable[[DeliveryFailed], object] | None,
        store: StateStore | None,
        dedup_window: int,
        state_prefix: str,
    ) -> None:
        if dedup_window < 0:
            raise ConfigurationError(f"dedup_window must be 0 or more, not {dedup_window}")
        self._factories: dict[str, AgentFactory] = {}
        self._instance_types: set[str] = set()
        # The class of each agent type's agents: one type, one class, so that the class's
        # subscriptions and handlers are the type's (a second class is refused).
        self._classes: dict[str, type[BaseAgent]] = {}
        self._cells: dict[AgentId, Cell] = {}
        self._listeners: list[Callable[[RuntimeEvent], object]] = []
        self._on_error = on_error
        self._store = store
        self._window = dedup_window
        self._prefix = state_prefix
        self._state: State = "new"
        self._pending = 0
        self._idle: asyncio.Event | None = None
        # `_idle` is set when no more than this many messages are in flight (a stop from
        # inside a handler waits for everything but its own call chain).
        self._idle_at = 0
        self._predicates: list[tuple[Callable[[], bool], asyncio.Future[None]]] = []
        self._tasks: set[asyncio.Task[None]] = set()
        # The handlers the runtime may have to cancel (and abandon): direct requests by
        # their token, broadcast handlers that suspended.
        self._calls: dict[CancellationToken, _Call] = {}
        self._event_calls: set[_Call] = set()
        # Bounds direct requests, suspended broadcast handlers and the runtime's own waits.
        self._default_timeout: float | None = None
        # Seconds a cancelled handler gets to end before it is abandoned.
        self._cleanup = 5.0

    async def _guarded_call(
        self,
        cell: Cell,
        message: Any,
        ctx: MessageContext,
        timeout: float | None,  # noqa: ASYNC109
        outer: CancellationToken | None,
        parent: MessageContext | None,
    ) -> Any:
        task = asyncio.current_task()
        if task is None:
            raise RuntimeStateError("send_message must be awaited inside an asyncio task")
        loop = task.get_loop()
        call = _Call(task, loop, self._cleanup)
        token = ctx.cancellation_token
        token.add_callback(call.on_cancel)
        self._calls[token] = call
        if timeout is not None:
            call.deadline = loop.time() + timeout
        if outer is not None:
            outer.add_callback(token.cancel)
        # Cancelling the handler that sent this request cancels the request too: the
        # handler it reaches sees its own token cancelled, not only a CancelledError.
        inherited = None if parent is None else parent.cancellation_token
        if inherited is not None:
            inherited.add_callback(token.cancel)
        try:
            return await self._call(cell, message, ctx)
        except asyncio.CancelledError as exc:
            if call.cancels and not (inherited is not None and inherited.is_cancelled):
                raise self._cancel_error(call, message, ctx, timeout) from None
            if not call.cancels and not task.cancelling():
                # Nobody cancelled anything: the handler raised it (say, it awaited a
                # future someone cancelled). Bare, the sender would take it for its own.
                raise CancelledError(
                    f"the handler of {type(message).__name__} {ctx.message_id} to "
                    f"{ctx.recipient} raised asyncio.CancelledError though nothing cancelled "
                    "it; catch it in the handler, or raise an error of your own"
                ) from exc
            raise  # the sender's own cancellation, or the sending handler's
        finally:
            call.end()
            del self._calls[token]
            if outer is not None:
                outer.remove_callback(token.cancel)
            if inherited is not None:
                inherited.remove_callback(token.cancel)

    def _cancel_error(
        self, call: _Call, message: Any, ctx: MessageContext, timeout: float | None
    ) -> Exception:
        what = f"{type(message).__name__} {ctx.message_id} to {ctx.recipient}"
        more = ""
        if call.abandoned:
            more = (
                f"; its handler did not end within {call.cleanup}s of being cancelled (does "
                "it catch asyncio.CancelledError without raising it again?) and was abandoned"
            )
        if call.timed_out:
            return TimeoutError(
                f"no reply to {what} within {timeout}s; the handler was cancelled{more} "
                "(raise the timeout, or make the handler faster)"
            )
        if self._state in ("stopping", "stopped", "closed"):
            return CancelledError(f"{what} was cancelled because the runtime stopped{more}")
        return CancelledError(f"{what} was cancelled through its CancellationToken{more}")

    async def _call(self, cell: Cell, message: Any, ctx: MessageContext) -> Any:
        # A message sent while tracing was on carries its sender's span: its handler gets
        # a span too. Without one, an attribute check is all tracing costs here.
        if cell.busy:
            turn = cell.turn
            if turn is not None and _within(ctx, turn):
                if ctx.trace_context is not None:
                    return await self._run_traced(cell, message, ctx)
                return await self._run(cell, message, ctx)
            token = ctx.cancellation_token
            self._calls[token].arm(token)
            await self._wait_turn(cell)
        else:
            cell.busy = True
        cell.turn = ctx
        try:
            if ctx.trace_context is not None:
                return await self._run_traced(cell, message, ctx)
            return await self._run(cell, message, ctx)
        finally:
            self._release(cell)

    async def _run_traced(self, cell: Cell, message: Any, ctx: MessageContext) -> Any:
        """`_run` inside the handler's ``process`` span (current in the handler's context,
        which `_run` copies from this one)."""
        span = _start_process(ctx, message)
        if span is None:  # tracing was turned off since the message was sent
            return await self._run(cell, message, ctx)
        token = tracing.activate(span)
        try:
            result = await self._run(cell, message, ctx)
        except BaseException as exc:
            tracing.end_span(span, exc)
            raise
        finally:
            tracing.deactivate(token)
        span.end()
        return result

    async def _wait_turn(self, cell: Cell) -> None:
        turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        mailbox = cell.mailbox
        if mailbox is None:
            mailbox = cell.mailbox = deque()
        mailbox.append(turn)
        try:
            await turn
        except BaseException:
            if not turn.done() or turn.cancelled():
                # Gave up waiting (timeout, cancellation): leave no dead entry behind, or
                # a busy agent's mailbox grows with every caller that times out.
                with contextlib.suppress(ValueError):
                    mailbox.remove(turn)
            elif turn.exception() is None:
                self._release(cell)  # the turn was handed over just as we were cancelled
            raise

    async def _run(self, cell: Cell, message: Any, ctx: MessageContext) -> Any:
        agent = cell.agent
        if agent is None:
            raise Undeliverable(f"agent {ctx.recipient} could not be created")
        mid = ctx.message_id
        if cell.handled is not None and cell.seen(mid):
            ctx.is_redelivery = True
        # The handler runs in the sender's task (no task switch: that is what makes a
        # request fast) but in a copy of the sender's context, so what it sets in
        # contextvars stays in its turn instead of leaking back into the sender.
        reset = _current.set(ctx)  # cheaper than setting it inside the copy
        context = copy_context()
        _current.reset(reset)
        coro: Any = agent._dispatch(message, ctx)
        if type(coro) is not types.CoroutineType:
            coro = _steps(coro)
        try:
            step = context.run(coro.send, None)
        except StopIteration as stop:
            result = stop.value
        else:
            token = ctx.cancellation_token
            call = self._calls.get(token)
            if call is not None:
                call.arm(token)
            result = await _resume(coro, context, step, call)
        if self._window:
            cell.remember(mid, self._window)
        return result

    def _release(self, cell: Cell) -> None:
        """End the current turn: hand it to the next waiter, or go idle."""
        cell.turn = None
        mailbox = cell.mailbox
        while mailbox:
            item = mailbox[0]
            if isinstance(item, MessageContext):
                self._spawn(self._drain(cell))
                return
            mailbox.popleft()
            if not item.done():
                item.set_result(None)
                return
        cell.mailbox = None
        cell.busy = False
        if cell.doomed:
            self._drop(cell)
        elif self._store is not None:  # idle time matters only for eviction
            cell.last_used = time.monotonic()

    def _drop(self, cell: Cell) -> None:
        """Take an idle released cell out of the table, and run its agent's close hook
        (in a task of its own, counted in flight: it may still send)."""
        agent = cell.agent
        if agent is None:
            return  # its activation failed: it left the table then
        agent_id = agent._id
        if self._cells.get(agent_id) is not cell:
            return  # taken out meanwhile (moved, evicted): whoever took it closes it
        del self._cells[agent_id]
        if type(agent).close is not BaseAgent.close:
            self._pending += 1
            self._spawn(self._close_released(agent_id, agent))
        if self._listeners:
            self._report(AgentReleased(agent_id))

    async def _close_released(self, agent_id: AgentId, agent: BaseAgent) -> None:
        try:
            async with asyncio.timeout(self._default_timeout):
                await agent.close()
        except Exception:
            _log.exception("close() of released agent %s failed", agent_id)
        finally:
            self._done_one()

    def _enqueue(self, cell: Cell, publication: MessageContext) -> None:
        self._pending += 1
        mailbox = cell.mailbox
        if mailbox is None:
            mailbox = cell.mailbox = deque()
        mailbox.append(publication)
        if not cell.busy:
            cell.busy = True
            self._spawn(self._drain(cell))

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        # A fresh context: the task must not carry the context of whoever happened to
        # spawn it (a publisher's handler, say), or requests an async factory sends would
        # count as that handler's call chain and re-enter its turn.
        loop = asyncio.get_running_loop()
        task: asyncio.Task[None] = loop.create_task(coro, context=Context())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _drain(self, cell: Cell) -> None:
        # The loop body is `_run` written out: events are the hot path of a broadcast,
        # and a coroutine frame per delivery is a measurable part of its cost.
        mailbox = cell.mailbox
        agent = cell.agent
        agent_id = cast(AgentId, None if agent is None else agent._id)
        window = self._window
        limit = window + (window >> 1)
        task = cast(asyncio.Task[Any], asyncio.current_task())
        try:
            while mailbox and agent is not None:  # a cell drains once its agent exists
                item = mailbox[0]
                if not isinstance(item, MessageContext):
                    break  # a direct request waits for its turn: `_release` hands it over
                mailbox.popleft()
                message = item._message
                ctx = item._copy_for(agent_id) if item.recipient is None else item
                mid = ctx.message_id
                handled = cell.handled
                if handled is not None and (
                    mid in handled if type(handled) is dict else handled == mid
                ):
                    ctx.is_redelivery = True
                cell.turn = ctx
                # Each handler gets its own copy of its publisher's context: a drain task
                # serves many publishers, and one event's contextvars must not leak into
                # the next.
                context = ctx._context
                context = Context() if context is None else context.copy()
                context.run(_current.set, ctx)
                span = None if ctx.trace_context is None else _start_process(ctx, message)
                if span is not None:
                    tracing.activate(span, context)  # thrown away with the context
                try:
                    coro: Any = agent._dispatch(message, ctx)
                    if type(coro) is not types.CoroutineType:
                        coro = _steps(coro)
                    try:
                        step = context.run(coro.send, None)
                    except StopIteration:
                        pass
                    else:  # it suspended: from here on, bounded and abandonable
                        await self._await_event(coro, context, step, task)
                except asyncio.CancelledError as exc:
                    if task.cancelling():
                        raise  # the drain is being cancelled (the runtime stops)
                    self._report(DeliveryFailed(agent_id, message, ctx, exc))  # raised itself
                except Exception as exc:
                    if span is not None:
                        tracing.end_span(span, exc)
                        span = None
                    self._report(DeliveryFailed(agent_id, message, ctx, exc))
                else:
                    handled = cell.handled
                    if type(handled) is dict and len(handled) < limit:
                        handled[mid] = None  # `Cell.remember` written out: the common case
                    elif window:
                        cell.remember(mid, window)
                finally:
                    if span is not None:
                        span.end()
                    self._done_one()
                    if item._done is not None:
                        item._done()
        finally:
            self._release(cell)

    async def _await_event(
        self, coro: Any, context: Context, step: Any, task: asyncio.Task[Any]
    ) -> None:
        """Finish a broadcast handler that suspended, within `default_timeout` (nobody
        waits for it, but it holds its agent's turn); a stop may abandon it."""
        loop = task.get_loop()
        call = _Call(task, loop, self._cleanup)
        timeout = self._default_timeout
        timer = None if timeout is None else loop.call_later(timeout, call.expire)
        self._event_calls.add(call)
        try:
            await _resume(coro, context, step, call)
        except asyncio.CancelledError:
            ours = call.cancels
            call.end()
            if ours and not task.cancelling():  # its timeout, not a stop
                more = " and was abandoned (it ignored the cancellation)" if call.abandoned else ""
                raise TimeoutError(
                    f"the handler ran past the runtime's default_timeout of {timeout}s; it "
                    f"was cancelled{more} (raise default_timeout, or make the handler faster)"
                ) from None
            raise
        finally:
            call.end()
            self._event_calls.discard(call)
            if timer is not None:
                timer.cancel()

    def _done_one(self) -> None:
        self._pending -= 1
        if self._predicates:
            self._check_predicates()
        if self._pending <= self._idle_at and self._idle is not None:
            self._idle.set()

    def _check_predicates(self) -> None:
        for entry in list(self._predicates):
            predicate, future = entry
            if future.done():
                self._predicates.remove(entry)
                continue
            try:
                met = predicate()
            except Exception as exc:
                future.set_exception(exc)
                continue
            if met:
                future.set_result(None)

    def _report(self, event: RuntimeEvent) -> None:
        if isinstance(event, DeliveryFailed):
            if self._on_error is not None:
                self._safe_call(self._on_error, event)
            elif not self._listeners:
                _log.error(
                    "agent %s failed to handle %s %s: %r",
                    event.agent_id,
                    type(event.message).__name__,
                    event.context.message_id,
                    event.error,
                )
        for listener in self._listeners:
            self._safe_call(listener, event)

    @staticmethod
    def _safe_call(hook: Callable[[Any], object], event: RuntimeEvent) -> None:
        try:
            hook(event)
        except Exception:
            _log.exception("runtime event hook %r failed on %r", hook, event)

    def _activate(self, agent_id: AgentId) -> Cell:
        """The cell for a new agent: ready at once for a plain factory, else busy until an
        activation task has created it (and restored its state from the store)."""
        factory = self._factories.get(agent_id.type)
        if factory is None:
            raise self._undeliverable(agent_id)
        cell = Cell(None)
        self._cells[agent_id] = cell
        made: Any = None
        if self._store is None:
            try:
                made = factory()
                # An agent first: `isawaitable` is an ABC check, slow on the hot path.
                ready = isinstance(made, BaseAgent)
                if ready or not inspect.isawaitable(made):
                    self._bind(made, agent_id)  # refuses anything but an agent
            except BaseException:
                del self._cells[agent_id]
                raise
            if ready:
                cell.agent = made
                if self._listeners:
                    self._report(AgentActivated(agent_id, restored=False))
                return cell
        cell.busy = True
        self._pending += 1
        self._spawn(self._finish_activation(cell, agent_id, factory, made))
        return cell

    def _undeliverable(self, agent_id: AgentId) -> Undeliverable:
        if agent_id.type in self._instance_types:
            keys = sorted(a.key for a in self._cells if a.type == agent_id.type)[:5]
            return Undeliverable(
                f"no agent at {agent_id}: type {agent_id.type!r} has only registered instances "
                f"(keys {keys}); register an instance with that key, or a factory"
            )
        return Undeliverable(
            f"no agent type {agent_id.type!r} is registered (message to {agent_id}); "
            f"register it with runtime.register_factory({agent_id.type!r}, ...)"
        )

    def _bind(self, agent: Any, agent_id: AgentId) -> None:
        if not isinstance(agent, BaseAgent):
            raise ConfigurationError(
                f"the factory of agent type {agent_id.type!r} returned {agent!r}, "
                "not a BaseAgent; return an agent instance"
            )
        self._check_class(agent_id.type, type(agent), "its factory made")
        agent._bind(cast("AgentRuntime", self), agent_id)

    def _check_class(self, agent_type: str, cls: type[BaseAgent], how: str) -> None:
        """Record the class of `agent_type`'s agents, or refuse a second one."""
        known = self._classes.setdefault(agent_type, cls)
        if known is not cls:
            raise ConfigurationError(
                f"agent type {agent_type!r} is {known.__qualname__}, but {how} a "
                f"{cls.__qualname__}: one agent type has one class (its handlers and "
                "subscriptions are the type's); register the other class under another type"
            )

    async def _finish_activation(
        self, cell: Cell, agent_id: AgentId, factory: AgentFactory, made: Any
    ) -> None:
        bound = asyncio.timeout(self._default_timeout)
        try:
            async with bound:
                agent, restored = await self._create(agent_id, factory, made, cell)
            cell.agent = agent
        except builtins.TimeoutError as exc:
            if not bound.expired():
                self._fail_activation(cell, agent_id, exc)
            else:
                late = TimeoutError(
                    f"creating agent {agent_id} (its factory, or loading its state) took longer"
                    f" than the runtime's default_timeout of {self._default_timeout}s"
                )
                self._fail_activation(cell, agent_id, late)
        except asyncio.CancelledError:
            stopped = RuntimeStateError(f"the runtime stopped while creating agent {agent_id}")
            self._fail_activation(cell, agent_id, stopped)
            raise
        except Exception as exc:
            self._fail_activation(cell, agent_id, exc)
        else:
            if self._listeners:
                self._report(AgentActivated(agent_id, restored=restored))
            self._release(cell)
        finally:
            self._done_one()

    async def _create(
        self, agent_id: AgentId, factory: AgentFactory, made: Any, cell: Cell
    ) -> tuple[BaseAgent, bool]:
        agent = made if made is not None else factory()
        if inspect.isawaitable(agent):
            agent = await agent
        self._bind(agent, agent_id)
        restored = False
        if self._store is not None:
            record = await self._store.get(self._prefix + str(agent_id))
            if record is not None:
                state, handled = decode_agent(record, str(agent_id))
                await restore(agent, state, agent_id)
                cell.restore_handled(handled, self._window)
                restored = True
        return agent, restored

    async def commit_state(self, agent_id: AgentId, message_id: str | None = None) -> None:
        """Write an agent's state and its handled message ids, with `message_id` among
        them, to the store in one write (one transaction on every backend).

        Call it from the handler, after the state change: a crash before the write leaves
        neither the change nor the id (the message is redelivered and handled again); a
        crash after it leaves both, so the redelivery is flagged `ctx.is_redelivery` by a
        fresh runtime on the same store, beyond the in-memory window.
        """
        if self._store is None:
            raise ConfigurationError(
                f"agent {agent_id} asked to commit its state, but the runtime has no store: "
                "create it with LocalRuntime(store=SQLiteStore(...)) or another StateStore"
            )
        cell = self._cells.get(agent_id)
        agent = None if cell is None else cell.agent
        if cell is None or agent is None:
            raise RuntimeStateError(
                f"agent {agent_id} is not active in this runtime; commit its state from its "
                "own handler"
            )
        if message_id is not None and self._window:
            cell.remember(message_id, self._window)
        ids = handled_ids(cell.handled)
        if message_id is not None and message_id not in ids:
            ids.append(message_id)  # no window: keep this one id all the same
        state = await agent.save_state()
        record = encode_agent(state, dict.fromkeys(ids))
        await self._store.put(self._prefix + str(agent_id), record)

    def _fail_activation(self, cell: Cell, agent_id: AgentId, exc: Exception) -> None:
        if self._cells.get(agent_id) is cell:
            del self._cells[agent_id]
        mailbox, cell.mailbox = cell.mailbox or deque(), None
        for item in mailbox:
            if isinstance(item, MessageContext):
                ctx = item._copy_for(agent_id) if item.recipient is None else item
                self._report(DeliveryFailed(agent_id, item._message, ctx, exc))
                self._done_one()
                if item._done is not None:
                    item._done()
            elif not item.done():
                item.set_exception(exc)

    async def _acquire(self, agent_id: AgentId) -> tuple[Cell, BaseAgent, bool]:
        """Take `agent_id`'s turn (creating the agent if needed) for the runtime's own
        work on it; release it with `_release` when the third value (held) is True.

        Called by a handler whose own call chain holds that turn (an agent loading its
        own state), it does not wait for the turn, which would never come, and holds
        nothing.
        """
        cell = self._cells.get(agent_id)
        if cell is None:
            cell = self._activate(agent_id)
        if cell.busy:
            turn, agent = cell.turn, cell.agent
            if turn is not None and agent is not None and _holds(_current.get(), turn):
                return cell, agent, False
            try:
                async with asyncio.timeout(self._default_timeout):
                    await self._wait_turn(cell)
            except builtins.TimeoutError:
                raise TimeoutError(
                    f"agent {agent_id} stayed busy for {self._default_timeout}s (the "
                    "runtime's default_timeout); its handler may be stuck: wait for it or "
                    "raise default_timeout"
                ) from None
        else:
            cell.busy = True
        agent = cell.agent
        if agent is None:
            self._release(cell)
            raise Undeliverable(f"agent {agent_id} could not be created")
        return cell, agent, True
