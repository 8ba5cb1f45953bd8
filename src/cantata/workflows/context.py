"""`WorkflowContext`: what a handler can do within one superstep of one run.

Everything a handler does is recorded in a `StepResult` that the runner commits at the
superstep boundary (messages are delivered in the next superstep, state becomes visible to
others then). Events reach the run's live sink at once, so `run_stream` shows them as they
happen.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, Never

from typing_extensions import TypeVar

from ..core import WorkflowError, new_id
from ._typing import type_name
from .events import LIFECYCLE_EVENTS, OutputEvent, RequestInfoEvent, WorkflowEvent
from .journal import InvocationEffects, call_effect

if TYPE_CHECKING:
    from .actor import Invocation
    from .executor import Executor

__all__ = ["UNSET", "Done", "RunLog", "StepResult", "WorkflowContext", "private_copy"]

OutT = TypeVar("OutT", default=Never)
WorkflowOutT = TypeVar("WorkflowOutT", default=Never)

UNSET: Any = object()
"""A `StepResult`'s executor state when the handler did not replace it."""
T = TypeVar("T")


class Done(Generic[T]):
    """An awaitable that is already complete: context methods act at once and return one,
    so `await ctx.send_message(x)` and a plain `ctx.send_message(x)` both work.

    It is its own iterator, one that ends at once with the value: awaiting it makes no
    generator (a handler awaits one per message it sends).
    """

    __slots__ = ("value",)

    def __init__(self, value: T) -> None:
        self.value = value

    def __await__(self) -> Generator[Any, None, T]:
        return self  # type: ignore[return-value]  # an iterator that returns at once

    def __iter__(self) -> Done[T]:
        return self

    def __next__(self) -> Any:
        raise StopIteration(self.value)

    def send(self, value: Any) -> Any:
        """Ends at once with the value (what `await` asks of an iterator)."""
        raise StopIteration(self.value)

    def throw(self, *args: Any) -> Any:
        """Nothing to pass an exception into: it is raised here."""
        raise args[0] if len(args) == 1 else args[1]


_DONE: Done[None] = Done(None)
_IMMUTABLE = frozenset({str, int, float, bool, complex, bytes, type(None)})


def private_copy(value: Any) -> Any:
    """A copy of a value that one handler may change without others seeing it: a committed
    value is shared by every executor of the superstep and by the next checkpoint, and a
    message by the event that reports it."""
    if type(value) in _IMMUTABLE:
        return value
    try:
        return copy.deepcopy(value)
    except Exception:  # not copyable (a lock, say): it could not be checkpointed either
        return value


@dataclass(slots=True)
class PendingRequest:
    """A request for input that waits for an answer."""

    request_id: str
    executor_id: str
    data: Any
    response_type: Any = None


_NO_ITEMS: Any = ()
"""The shared empty value every list and dict of a `StepResult` starts as (a tuple: a
dataclass default must be immutable; reads, `in` and truth tests work on it)."""
_NO_KEYS: Any = _NO_ITEMS


@dataclass(slots=True)
class StepResult:
    """What one executor did in one superstep; the runner commits it at the boundary.

    Its lists and dicts start as shared empty (read-only) values, replaced by a list or
    dict of their own on the first write (`WorkflowContext` does it): most handlers only
    send, and a fan-out of a hundred makes a hundred results per superstep.
    """

    executor_id: str
    sent: list[tuple[Any, str | None]] = _NO_ITEMS
    outputs: list[Any] = _NO_ITEMS
    state_writes: dict[str, Any] = _NO_KEYS
    executor_state: Any = UNSET
    log_appends: dict[str, list[Any]] = _NO_KEYS
    requests: list[PendingRequest] = _NO_ITEMS
    published: int = 0
    """How many events a remote invocation published (the runner waits for them all)."""

    @property
    def executor_state_changed(self) -> bool:
        """Whether the handler replaced its executor state."""
        return self.executor_state is not UNSET


class RunLog:
    """An append-only log of one executor in one run (a conversation, say).

    A checkpoint writes only the entries appended since the previous one, so saving stays
    cheap however long the log has grown.
    """

    __slots__ = ("_committed", "_pending")

    def __init__(self, committed: list[Any], pending: list[Any]) -> None:
        self._committed = committed
        self._pending = pending

    def append(self, *entries: Any) -> None:
        """Add entries at the end."""
        self._pending.extend(entries)

    def extend(self, entries: list[Any]) -> None:
        """Add a list of entries at the end."""
        self._pending.extend(entries)

    @property
    def entries(self) -> list[Any]:
        """Every entry, committed and appended in this superstep (a new list)."""
        return [*self._committed, *self._pending]

    def __len__(self) -> int:
        return len(self._committed) + len(self._pending)


class WorkflowContext(Generic[OutT, WorkflowOutT]):
    """The handle a handler gets: send, yield outputs, emit events, state, ask for input.

    ``WorkflowContext[Sent, Yielded]`` in a handler's signature declares what it sends and
    what it yields as workflow outputs; `build()` checks edges against those types.
    """

    __slots__ = (
        "_answer_is_output",
        "_executor",
        "_initial_executor_state",
        "_inv",
        "_logs",
        "_result",
        "_sink",
        "_state",
        "_targets",
        "_yields",
        "cancellation_token",
        "executor_id",
        "kwargs",
        "request_id",
        "run_id",
        "source_executor_ids",
        "streaming",
    )

    def __init__(
        self, executor: Executor, inv: Invocation, result: StepResult, sources: list[str]
    ) -> None:
        self._executor = executor
        self.executor_id = executor.id
        self.run_id = inv.run_id
        self.source_executor_ids = sources
        """Ids of the executors that sent the message being handled (the run's input: [])."""
        self._state = inv.state
        self._logs = inv.logs
        wiring = inv.wiring
        self._targets = wiring.targets
        self._yields = wiring.yields
        """False when the builder's ``output_from=`` leaves this executor out."""
        self._answer_is_output = wiring.answer_is_output
        """True when this executor's answer (an agent's response) is a workflow output by
        default: it has no out-edges, or ``output_from=`` names it."""
        self._sink = inv.sink
        self.kwargs = inv.kwargs
        """Keyword arguments of the run for this executor (shared ones and its own)."""
        self.streaming = inv.streaming
        """True in `run_stream`: agents should stream their updates."""
        self.cancellation_token = inv.cancellation_token
        self._result = result
        self.request_id: str | None = None
        """In a response handler: the id of the request being answered."""
        self._initial_executor_state = inv.executor_state
        self._inv = inv

    # -- messages and outputs ----------------------------------------------------------

    def send_message(self, message: OutT, target_id: str | None = None) -> Done[None]:
        """Send to every out-edge, or only to `target_id` (which must be an edge target).

        Takes effect at once; awaiting the result is optional, so synchronous handlers can
        send too.
        """
        if target_id is not None and target_id not in self._targets:
            raise WorkflowError(
                f"executor {self.executor_id!r} sent to {target_id!r}, which no edge from it "
                f"reaches; its targets are {sorted(self._targets)}"
            )
        result = self._result
        if result.sent is _NO_ITEMS:
            result.sent = [(message, target_id)]
        else:
            result.sent.append((message, target_id))
        return _DONE

    def yield_output(self, output: WorkflowOutT) -> Done[None]:
        """Yield a workflow output: it appears in the run's result and as an `OutputEvent`
        (at once; awaiting is optional).

        When the builder's ``output_from=`` does not name this executor, the value is not a
        workflow output and is dropped.
        """
        if not self._yields:
            return _DONE
        result = self._result
        if result.outputs is _NO_ITEMS:
            result.outputs = []
        result.outputs.append(output)
        self._sink(OutputEvent(self.executor_id, output))
        return _DONE

    def add_event(self, event: WorkflowEvent) -> Done[None]:
        """Emit a custom event (a `WorkflowEvent` subclass); streamed runs see it at once
        (awaiting is optional).

        Lifecycle events (status, superstep, executor, output, request and failure events:
        `cantata.workflows.events.LIFECYCLE_EVENTS`) are the runner's alone, so consumers
        can trust them: emitting one raises `WorkflowError` (and fails the handler). Use
        `yield_output` and `request_info`, or define an event of your own.
        """
        if not isinstance(event, WorkflowEvent):
            raise WorkflowError(
                f"executor {self.executor_id!r} emitted a {type_name(type(event))}; "
                "events must subclass cantata.workflows.WorkflowEvent"
            )
        if isinstance(event, LIFECYCLE_EVENTS):
            raise WorkflowError(
                f"executor {self.executor_id!r} emitted a {type(event).__name__}, a lifecycle "
                "event that only the workflow runner emits; use ctx.yield_output or "
                "ctx.request_info, or emit a WorkflowEvent subclass of your own"
            )
        self._sink(event)
        return _DONE

    # -- shared state ------------------------------------------------------------------

    def get_state(self, key: str, default: Any = None) -> Any:
        """A shared value: committed at the last boundary, or written by this handler.

        A committed value comes as a copy of its own, so ``items = ctx.get_state("items")``,
        ``items.append(x)``, ``ctx.set_state("items", items)`` changes nothing that others
        see before the boundary, nor anything at all should the handler fail.
        """
        writes = self._result.state_writes
        if key in writes:
            return writes[key]
        if key not in self._state:
            return default
        return private_copy(self._state[key])

    def set_state(self, key: str, value: Any) -> None:
        """Write a shared value; other executors see it from the next superstep on."""
        result = self._result
        if result.state_writes is _NO_KEYS:
            result.state_writes = {}
        result.state_writes[key] = value

    # -- per-executor state and logs ---------------------------------------------------

    def get_executor_state(self, default: Any = None) -> Any:
        """This executor's own state in this run (kept in checkpoints).

        A copy, as with `get_state`: a change is kept once given to `set_executor_state`
        (a checkpoint would not hold one that is not, so the run does not either).
        """
        if self._result.executor_state is not UNSET:
            return self._result.executor_state
        value = self._initial_executor_state
        return default if value is None else private_copy(value)

    def _committed_executor_state(self) -> Any:
        """The state as committed, not copied: for executors that copy what they change."""
        if self._result.executor_state is not UNSET:
            return self._result.executor_state
        return self._initial_executor_state

    def _state_is_committed(self) -> bool:
        """Whether `_committed_executor_state` is the committed value (to be copied before
        a change), not one this handler set."""
        return self._result.executor_state is UNSET

    def set_executor_state(self, value: Any) -> None:
        """Replace this executor's state in this run; it must be JSON through the registry."""
        self._result.executor_state = value

    def log(self, name: str, *, shared: bool = False) -> RunLog:
        """This executor's append-only log `name` in this run (a conversation, say); with
        ``shared=True`` the run's log of that name that every executor may append to."""
        key = f"*/{name}" if shared else f"{self.executor_id}/{name}"
        result = self._result
        if result.log_appends is _NO_KEYS:
            result.log_appends = {}
        pending = result.log_appends.setdefault(key, [])
        return RunLog(self._logs.get(key, _NO_ITEMS), pending)  # the committed part is read only

    # -- human in the loop -------------------------------------------------------------

    def request_info(self, request: Any, response_type: Any = None) -> Done[str]:
        """Ask for input; the run ends idle with this request pending until it is answered.

        The answer goes to this executor's `@response_handler` for the request's type, which
        also fixes the answer's type unless `response_type` is given (to survive a
        checkpoint, that must be a builtin or registered class). Returns the request id.
        """
        declared = self._executor._response_type_for(request)
        if declared is None:
            raise WorkflowError(
                f"executor {self.executor_id!r} asked for input with a "
                f"{type_name(type(request))} but has no @response_handler taking that request "
                "type; add one to receive the answer"
            )
        rtype = declared if response_type is None else response_type
        request_id = new_id()
        result = self._result
        if result.requests is _NO_ITEMS:
            result.requests = []
        result.requests.append(PendingRequest(request_id, self.executor_id, request, rtype))
        self._sink(RequestInfoEvent(self.executor_id, request_id, request, rtype))
        return Done(request_id)

    # -- effects -----------------------------------------------------------------------

    def idempotency_key(self, key: str) -> str:
        """The idempotency key the next ``ctx.effect(key, ...)`` of this handler gets:
        ``"<run>:<executor>:<superstep>:<key>"``, the same on every resume."""
        return self._effects().peek_key(key)

    def _effects(self) -> InvocationEffects:
        inv = self._inv
        if inv.effects is None:  # not a durable run: keys only, nothing journaled
            inv.effects = InvocationEffects(None, inv.run_id, inv.executor_id, inv.superstep)
        return inv.effects

    async def effect(self, key: str, fn: Callable[..., Any], *args: Any) -> Any:
        """Run a side effect once per run, across crashes and resumes: ``fn(*args)`` (sync or
        async) runs the first time and its result is journaled in the run's checkpoint
        store before this returns; a resume or retry of this superstep gets the journaled
        result and `fn` does not run.

        Exactly once for an effect whose result was journaled; at most one re-run, with the
        same idempotency key, for one cut off before its result was written. `fn` gets that
        key as ``idempotency_key=`` when it takes the keyword: pass it to the outside system
        so it can drop the repeat. Using `key` again in one invocation makes ``key#2``, ...;
        the result must be JSON data or a registered class. Without a checkpoint store, `fn`
        runs every time.
        """
        if type(key) is not str or not key:
            raise WorkflowError(
                f"executor {self.executor_id!r} called ctx.effect with key {key!r}; the key "
                "must be a non-empty string naming the effect (stable across resumes)"
            )
        if not callable(fn):
            raise WorkflowError(
                f"executor {self.executor_id!r} called ctx.effect({key!r}, ...) with a "
                f"{type_name(type(fn))}, not a function to run"
            )
        effects = self._effects()
        ikey = effects.next_key(key)
        found, value = await effects.lookup(ikey)
        if found:
            return value
        return await effects.record(ikey, await call_effect(fn, args, ikey))
