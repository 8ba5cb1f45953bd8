"""The effect journal: side effects of a run that happen once across crashes and resumes.

`await ctx.effect(key, fn, *args)` runs `fn` the first time and writes its result into the
run's checkpoint store (beside the checkpoints) before the handler goes on; a resume or a
retry of the same superstep finds the result there and returns it without calling `fn`.

The exact guarantee:

- exactly once for an effect whose result was journaled: however often the run is resumed
  (or the superstep retried), `fn` does not run again and the same result is returned;
- at most one re-run for an effect cut off mid-flight (it ran, and the process died before
  its result was written): the re-run gets the same idempotency key, so an outside system
  that dedupes on it (a payment API's ``Idempotency-Key``, a unique column) stays safe.

An effect's idempotency key is ``"<run>:<executor>:<superstep>:<key>"`` (``"#2"``, ``"#3"``
... after `key` when one handler call uses the same key again). `fn` gets it as its
``idempotency_key`` keyword when it takes one. Without a checkpoint store nothing is
durable: `fn` runs each time and only the key is given.

Where the executor runs in another process than its run's runner (``placement="executor"``
on Ray), it reaches the journal through the runtime: a `RemoteJournal` sends each lookup
and record to the runner's local subscriber, which answers from the run's journal
(`serve_journal`) once the write is done, so the guarantee above holds unchanged.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from ..core import (
    CheckpointError,
    StoreError,
    WorkflowError,
    from_json,
    register,
    short_repr,
    to_json,
)
from ..runtime import AgentId
from ..stores import StateStore, seal, unseal

__all__ = [
    "EffectJournal",
    "InvocationEffects",
    "JournalCall",
    "RemoteJournal",
    "ReplayJournal",
    "effect_key",
    "serve_journal",
]

_PREFIX = "wf:fx:"


def effect_key(run_id: str, executor_id: str, superstep: int, key: str) -> str:
    """The idempotency key of an effect: stable across resumes of the same run."""
    return f"{run_id}:{executor_id}:{superstep}:{key}"


class EffectJournal:
    """Effect results of runs, in a `StateStore` (the one the run's checkpoints use).

    Each result is one sealed keyed value ``wf:fx:<idempotency key>``, written before the
    handler that asked for it goes on.
    """

    __slots__ = ("store",)

    def __init__(self, store: StateStore) -> None:
        self.store = store

    async def lookup(self, key: str) -> tuple[bool, Any]:
        """``(True, result)`` when the effect `key` was journaled, else ``(False, None)``."""
        where = f"journaled effect {short_repr(key)}"
        try:
            data = await self.store.get(_PREFIX + key)
            if data is None:
                return False, None
            record = unseal(data, where=where)
        except StoreError as exc:
            raise CheckpointError(f"{where} cannot be read: {exc}") from exc
        if type(record) is not dict or "result" not in record:
            raise CheckpointError(f"{where} holds no result; it was written by something else")
        return True, from_json(record["result"])

    async def record(self, key: str, result: Any) -> Any:
        """Journal a result; returns it as a resume will see it (rebuilt from JSON)."""
        data = _data(key, result)
        try:
            await self.store.put(_PREFIX + key, seal({"result": data}))
        except StoreError as exc:
            raise CheckpointError(f"effect {short_repr(key)} cannot be journaled: {exc}") from exc
        return from_json(data)

    async def keys(self, run_id: str) -> list[str]:
        """The idempotency keys journaled for one run, in key order."""
        prefix = f"{_PREFIX}{run_id}:"
        return [k[len(_PREFIX) :] for k in await self.store.keys(prefix)]


def _data(key: str, result: Any) -> Any:
    try:
        return to_json(result)
    except Exception as exc:
        raise WorkflowError(
            f"effect {short_repr(key)} returned a {type(result).__name__} that cannot be "
            f"journaled ({exc}); return JSON data or a registered class"
        ) from exc


@register(name="cantata.workflows.JournalCall")
@dataclass(slots=True)
class JournalCall:
    """One journal operation sent to the runner of a run: ``lookup`` or ``record`` of an
    idempotency key (`data`: the result as JSON data), or the ``keys`` of run `key`."""

    op: Literal["lookup", "record", "keys"]
    key: str
    data: Any = None


class RemoteJournal(EffectJournal):
    """The journal of a run whose runner is in another process, reached through the
    runtime: each call is a direct request to the runner's local subscriber, answered
    once the run's own journal has done it (a record is written before this returns)."""

    __slots__ = ("_endpoint", "_runtime")

    def __init__(self, runtime: Any, endpoint: AgentId) -> None:  # no store of its own
        self._runtime = runtime
        self._endpoint = endpoint

    async def lookup(self, key: str) -> tuple[bool, Any]:
        """The runner's answer: ``(True, result)`` when `key` was journaled."""
        found, value = await self._runtime.send_message(JournalCall("lookup", key), self._endpoint)
        return bool(found), value

    async def record(self, key: str, result: Any) -> Any:
        """Have the runner journal `result`; returns it as a resume will see it."""
        data = _data(key, result)
        await self._runtime.send_message(JournalCall("record", key, data), self._endpoint)
        return from_json(data)

    async def keys(self, run_id: str) -> list[str]:
        """The idempotency keys the runner's journal has for `run_id`."""
        return list(await self._runtime.send_message(JournalCall("keys", run_id), self._endpoint))


async def serve_journal(journal: EffectJournal, call: JournalCall) -> Any:
    """Answer a `RemoteJournal`'s call from the run's journal (in the runner's process)."""
    if call.op == "lookup":
        found, value = await journal.lookup(call.key)
        return [found, value]
    if call.op == "record":
        await journal.record(call.key, from_json(call.data))
        return None
    if call.op == "keys":
        return await journal.keys(call.key)
    raise WorkflowError(
        f"unknown journal operation {call.op!r}; this runner knows lookup, "
        "record and keys: run the same cantata version on every node"
    )


class InvocationEffects:
    """The effect scope of one invocation (executor, superstep, run): what `ctx.effect`
    and, through `cantata.core.durable`, model calls and effect tools journal into."""

    __slots__ = ("_counts", "executor_id", "journal", "run_id", "superstep")

    def __init__(
        self, journal: EffectJournal | None, run_id: str, executor_id: str, superstep: int
    ) -> None:
        self.journal = journal
        self.run_id = run_id
        self.executor_id = executor_id
        self.superstep = superstep
        self._counts: dict[str, int] = {}

    def peek_key(self, key: str) -> str:
        """The idempotency key the next use of `key` will get."""
        return self._key(key, self._counts.get(key, 0) + 1)

    def next_key(self, key: str) -> str:
        """The idempotency key of this use of `key` (``key#2`` for the second, ...)."""
        nth = self._counts[key] = self._counts.get(key, 0) + 1
        return self._key(key, nth)

    def _key(self, key: str, nth: int) -> str:
        name = key if nth == 1 else f"{key}#{nth}"
        return effect_key(self.run_id, self.executor_id, self.superstep, name)

    async def lookup(self, key: str) -> tuple[bool, Any]:
        """The journaled result of `key`, when there is one."""
        return (False, None) if self.journal is None else await self.journal.lookup(key)

    async def record(self, key: str, result: Any) -> Any:
        """Journal a result (nothing without a journal); returns it as a resume sees it."""
        return result if self.journal is None else await self.journal.record(key, result)


class ReplayJournal(EffectJournal):
    """A journal that only answers: a replay runs offline, so an effect or model call the
    recorded run did not journal is an error instead of a new action."""

    __slots__ = ()

    async def lookup(self, key: str) -> tuple[bool, Any]:
        """The journaled result; `WorkflowError` when the recorded run has none."""
        found, value = await super().lookup(key)
        if not found:
            raise WorkflowError(
                f"replay needs the result of {short_repr(key)}, which the recorded run did not "
                "journal (the handlers took another path, or the run did not get that far): "
                "replay only finished runs with the same workflow, or fork() to act anew"
            )
        return found, value

    async def record(self, key: str, result: Any) -> Any:
        """Never reached (a miss already failed); refuses to write all the same."""
        raise WorkflowError(f"a replay does not journal anything (effect {short_repr(key)})")


def journal_of(store: Any) -> EffectJournal | None:
    """The journal beside a checkpoint store: its `StateStore` when it has one."""
    inner = getattr(store, "store", None)
    if inner is None:  # no store (the usual run): no protocol check
        return None
    return EffectJournal(inner) if isinstance(inner, StateStore) else None


def _takes_key(fn: Callable[..., Any]) -> bool:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):  # a builtin without a signature
        return False
    p = params.get("idempotency_key")
    if p is not None and p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD):
        return True
    return any(q.kind is q.VAR_KEYWORD for q in params.values())


async def call_effect(fn: Callable[..., Any], args: tuple[Any, ...], key: str) -> Any:
    """Call an effect's function (sync or async), giving it its idempotency key if it
    takes one."""
    result = fn(*args, idempotency_key=key) if _takes_key(fn) else fn(*args)
    if inspect.isawaitable(result):
        result = await result
    return result
