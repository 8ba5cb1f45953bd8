"""Runs started from the dev UI: their events kept in order for any number of watchers,
and in the server's store, so past runs are still there after a restart.

A run of a workflow or team goes on in a task of its own; its events (as JSON) are
appended to a `DevRun`'s log, and each server-sent-events watcher reads the log from where
it stands, so a page that reconnects (``Last-Event-ID``) misses nothing. Answers to
requests for input and resumes from a checkpoint continue the same log. The registry
cancels what is still running when the app stops.

In the store (the server's ``--store``; memory unless it is durable): each run's record,
``devui:run:<id>`` (schema 1: id, name, kind, status, run_id, pending), its events in the
log of the same name (the first `MAX_KEPT_EVENTS`), and the ids in start order,
``devui:runs``; past `MAX_KEPT_RUNS` the oldest stopped runs are deleted. A run read back
after a restart shows its events and checkpoints and resumes from them, but a run that was
waiting for an answer cannot take it: the waiting run lived in the stopped process (resume
from its checkpoint instead). One store serves one server's dev UI at a time.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import re
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

from ..core import StoreError, new_id
from ..stores import StateStore, StoreCorruptionError
from ..workflows import CheckpointStore, RequestInfoEvent, WorkflowEvent
from .errors import RequestError
from .served import Served

__all__ = [
    "DEVUI_RUN_SCHEMA_VERSION",
    "MAX_KEPT_EVENTS",
    "MAX_KEPT_RUNS",
    "DevRun",
    "RunRegistry",
    "event_json",
]

DEVUI_RUN_SCHEMA_VERSION = 1
MAX_KEPT_RUNS = 200
"""Runs the dev UI keeps (in memory and in the store); the oldest stopped ones go first."""
MAX_KEPT_EVENTS = 5000
"""Events of one run written to the store; a run's later events live in memory only."""

_MAX_TEXT = 2000
_MAX_RUNS = MAX_KEPT_RUNS
_DONE = frozenset({"idle", "idle_with_pending_requests", "failed", "cancelled", "interrupted"})
_PREFIX = "devui:run:"
_INDEX = "devui:runs"
_RUN_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
_log = logging.getLogger("cantata.serve.devui")


def _plain(value: Any, depth: int = 0) -> Any:
    """JSON data for the page: primitives as they are, dataclasses and containers walked
    (a few levels), anything else by its text, cut short."""
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, str):
        return value if len(value) <= _MAX_TEXT else value[:_MAX_TEXT] + "…"
    if depth > 4:
        return _plain(repr(value), depth)
    if isinstance(value, BaseException):
        return f"{type(value).__name__}: {value}"
    if isinstance(value, type):
        return value.__name__
    text = getattr(value, "text", None)
    if isinstance(text, str) and type(value).__name__ in {"Message", "AgentResponse"}:
        return {"type": type(value).__name__, "text": _plain(text), **_author(value)}
    if dataclasses.is_dataclass(value):
        return {
            "type": type(value).__name__,
            **{
                f.name: _plain(getattr(value, f.name), depth + 1) for f in dataclasses.fields(value)
            },
        }
    if isinstance(value, Mapping):
        return {str(k): _plain(v, depth + 1) for k, v in list(value.items())[:50]}
    if isinstance(value, (list, tuple)):
        return [_plain(v, depth + 1) for v in value[:50]]
    return _plain(repr(value), depth)


def _author(value: Any) -> dict[str, Any]:
    name = getattr(value, "author_name", None)
    return {"author": name} if isinstance(name, str) else {}


def event_json(event: Any) -> dict[str, Any]:
    """One event (or a team's `TaskResult`) as the page shows it: its type and fields."""
    data = _plain(event)
    return data if isinstance(data, dict) else {"type": type(event).__name__, "value": data}


class DevRun:
    """One run of a served workflow or team as the page sees it: an ordered event log,
    its status, pending requests, and what is needed to continue it."""

    def __init__(
        self, served: Served, store: CheckpointStore, *, state: StateStore | None = None
    ) -> None:
        self.id = new_id()[:16]
        self.served = served
        self.store = store
        self.events: list[dict[str, Any]] = []
        self.status = "in_progress"
        self.workflow_run: Any = None
        """The `WorkflowRun` (workflows) to answer requests with."""
        self.session: Any = None
        """The `TeamSession` (teams)."""
        self.run_id: str | None = None
        """The workflow run id (checkpoints are listed by it)."""
        self.pending: list[RequestInfoEvent] = []
        self._changed = asyncio.Condition()
        self._task: asyncio.Task[None] | None = None
        self._running = False
        self._state = state
        self._kept = 0
        self.restored = False
        """Read back from the store: its waiting run (if any) did not survive."""
        self._restored_pending: list[Any] = []

    @property
    def busy(self) -> bool:
        """True while a run, continuation or resume of it is under way."""
        return self._running

    def summary(self) -> dict[str, Any]:
        """What the page shows about the run besides its events."""
        return {
            "id": self.id,
            "name": self.served.name,
            "kind": self.served.kind,
            "status": self.status,
            "run_id": self.run_id,
            "events": len(self.events),
            "pending": self._restored_pending
            if self.restored
            else [
                {
                    "request_id": r.request_id,
                    "executor_id": r.executor_id,
                    "data": _plain(r.data),
                    "response_type": _plain(r.response_type),
                }
                for r in self.pending
            ],
            "restored": self.restored,
        }

    def record(self) -> dict[str, Any]:
        """What the store keeps of the run besides its events."""
        summary = self.summary()
        return {
            "schema_version": DEVUI_RUN_SCHEMA_VERSION,
            **{k: summary[k] for k in ("id", "name", "kind", "status", "run_id", "pending")},
        }

    @classmethod
    def restore(
        cls,
        served: Served,
        store: CheckpointStore,
        state: StateStore,
        record: dict[str, Any],
        events: list[Any],
    ) -> DevRun:
        """A run of an earlier server process, read back from its record and events."""
        run = cls(served, store, state=state)
        run.id, run.run_id, run.restored = record["id"], record.get("run_id"), True
        status = record.get("status")
        run.status = status if status in _DONE else "interrupted"
        pending = record.get("pending")
        run._restored_pending = pending if type(pending) is list else []
        run.events = [e for e in events if type(e) is dict]
        run._kept = len(events)
        return run

    async def save(self) -> None:
        """Write the run's record to the store (when it has one)."""
        if self._state is not None:
            await self._state.put(_PREFIX + self.id, self.record())

    async def _keep(self, data: dict[str, Any]) -> None:
        if self._state is None or self._kept > MAX_KEPT_EVENTS:
            return
        if self._kept == MAX_KEPT_EVENTS:
            data = {"type": "Note", "note": f"events past {MAX_KEPT_EVENTS} are not stored"}
        try:
            await self._state.append(_PREFIX + self.id, [data])
        except StoreError:  # not JSON the store takes (a NaN): keep its type
            await self._state.append(_PREFIX + self.id, [{"type": data.get("type", "?")}])
        self._kept += 1

    async def _add(self, item: Any) -> None:
        data = event_json(item)
        if isinstance(item, WorkflowEvent) and data.get("type") == "WorkflowStartedEvent":
            self.run_id = data.get("run_id") or self.run_id
        if data.get("type") == "StatusEvent":
            self.status = str(data.get("status"))
        async with self._changed:
            self.events.append(data)
            self._changed.notify_all()
        await self._keep(data)

    def start(self, work: Callable[[DevRun], Any]) -> None:
        """Run `work(self)` (an async generator of events) in a task of its own."""
        if self.busy:
            raise RequestError(
                f"run {self.id!r} of {self.served.name!r} is still going: wait for it to stop "
                "before answering or resuming it",
                status=409,
            )
        self.check_live()
        self.status = "in_progress"
        self._running = True
        self._task = asyncio.create_task(self._drive(work), name=f"devui-run-{self.id}")

    def check_live(self) -> None:
        """Refuse to continue a run read back from the store (a 409 saying what to do)."""
        if self.restored:
            raise RequestError(
                f"run {self.id!r} of {self.served.name!r} was started by an earlier server "
                "process, and what it was doing did not survive the restart: resume it from "
                "one of its checkpoints",
                status=409,
            )

    async def _drive(self, work: Callable[[DevRun], Any]) -> None:
        try:
            async for item in work(self):
                await self._add(item)
            if self.status not in _DONE:
                self.status = "idle"
        except asyncio.CancelledError:
            self.status = "cancelled"
            raise
        except Exception as exc:  # the page shows why the run stopped
            self.status = "failed"
            await self._add({"type": "Error", "error": f"{type(exc).__name__}: {exc}"})
        finally:
            self._running = False
            try:
                await self.save()
            except Exception as exc:  # the store closed under a stopping server
                _log.warning("dev UI run %s: its record was not saved: %s", self.id, exc)
            async with self._changed:
                self._changed.notify_all()

    async def follow(self, after: int, *, wait: float) -> AsyncIterator[tuple[int, dict[str, Any]]]:
        """The events past index `after`, then each new one, until the run stops; a wait
        longer than `wait` seconds yields a keep-alive ``(-1, {})``."""
        sent = after
        while True:
            while sent < len(self.events):
                yield sent, self.events[sent]
                sent += 1
            if not self.busy:
                return
            # in this task (no `wait_for` task that a disconnect cancels while it takes the
            # lock back), and never holding the lock across a yield
            try:
                async with asyncio.timeout(wait), self._changed:
                    await self._changed.wait_for(self._past(sent))
            except TimeoutError:
                yield -1, {}

    def _past(self, sent: int) -> Callable[[], bool]:
        return lambda: len(self.events) > sent or not self.busy

    async def cancel(self) -> None:
        """Stop what is running (bounded)."""
        task = self._task
        if task is not None and not task.done():
            task.cancel()
            await asyncio.wait([task], timeout=5)


Restorer = Callable[[dict[str, Any], list[Any]], DevRun | None]
"""Makes a stored run's `DevRun` (None: what it ran is no longer served)."""


class RunRegistry:
    """The dev UI's runs by id: live ones in this process, past ones in the store (with
    `state`; the oldest stopped runs are dropped past `MAX_KEPT_RUNS`)."""

    def __init__(self, state: StateStore | None = None, restore: Restorer | None = None) -> None:
        self._runs: dict[str, DevRun] = {}
        self._state = state
        self._restore = restore
        self._lock = asyncio.Lock()

    async def add(self, run: DevRun) -> DevRun:
        """Keep `run` (its record in the store too), dropping the oldest stopped runs past
        the bound."""
        async with self._lock:
            self._runs[run.id] = run
            if self._state is None:
                order = list(self._runs)
            else:
                order = [*(i for i in await self._index() if i != run.id), run.id]
            stopped = [rid for rid in order if rid != run.id and not self._busy(rid)]
            gone = set(stopped[: max(0, len(order) - _MAX_RUNS)])
            for rid in gone:
                self._runs.pop(rid, None)
            if self._state is not None:
                for rid in gone:
                    await self._state.delete(_PREFIX + rid)
                    await self._state.delete_log(_PREFIX + rid)
                await self._state.put(_INDEX, [rid for rid in order if rid not in gone])
                await run.save()
        return run

    def _busy(self, run_id: str) -> bool:
        run = self._runs.get(run_id)
        return run is not None and run.busy

    async def _index(self) -> list[str]:
        assert self._state is not None
        order = await self._state.get(_INDEX)
        if order is None:
            return []
        if type(order) is not list or any(type(i) is not str for i in order):
            raise StoreCorruptionError(f"the dev UI's run index {_INDEX!r} is damaged")
        return list(order)

    async def get(self, run_id: str) -> DevRun:
        """The run (read back from the store if an earlier process ran it), or a 404."""
        run = self._runs.get(run_id)
        if run is None and self._state is not None and _RUN_ID.fullmatch(run_id):
            run = await self._load(run_id)
        if run is None:
            raise RequestError(
                f"no dev UI run {run_id!r} on this server (start one from the page; past "
                f"runs are kept in the server's store, the latest {_MAX_RUNS})",
                status=404,
                param="run_id",
            )
        return run

    async def _load(self, run_id: str) -> DevRun | None:
        assert self._state is not None
        record = await self._state.get(_PREFIX + run_id)
        if record is None or self._restore is None:
            return None
        if (
            type(record) is not dict
            or record.get("schema_version") != DEVUI_RUN_SCHEMA_VERSION
            or record.get("id") != run_id
        ):
            raise StoreCorruptionError(
                f"the stored dev UI run {run_id!r} is damaged or of an unknown schema version "
                f"(this server reads version {DEVUI_RUN_SCHEMA_VERSION})"
            )
        events = await self._state.read(_PREFIX + run_id)
        run = self._restore(record, events)
        if run is not None:
            self._runs.setdefault(run_id, run)
        return self._runs.get(run_id)

    async def summaries(self) -> list[dict[str, Any]]:
        """Every run kept, oldest first: live ones as they stand, past ones as stored."""
        if self._state is None:
            return [r.summary() for r in self._runs.values()]
        out = []
        for rid in await self._index():
            run = self._runs.get(rid)
            if run is not None:
                out.append(run.summary())
                continue
            record = await self._state.get(_PREFIX + rid)
            if type(record) is dict and record.get("schema_version") == DEVUI_RUN_SCHEMA_VERSION:
                status = record.get("status")
                out.append(
                    {
                        **{k: v for k, v in record.items() if k != "schema_version"},
                        "status": status if status in _DONE else "interrupted",
                        "events": await self._state.length(_PREFIX + rid),
                        "restored": True,
                    }
                )
        return out

    def all(self) -> list[DevRun]:
        """Every run in this process, oldest first."""
        return list(self._runs.values())

    async def close(self) -> None:
        """Cancel every run still going."""
        await asyncio.gather(*(r.cancel() for r in self._runs.values()))


def parse_answer(request: RequestInfoEvent, text: str) -> Any:
    """The page's answer as the request wants it: text for a str (or untyped) request,
    otherwise JSON."""
    rtype = request.response_type
    if rtype is None or rtype is str:
        return text
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise RequestError(
            f"the answer to request {request.request_id!r} of executor "
            f"{request.executor_id!r} must be JSON for a {_plain(rtype)} ({exc.msg}); "
            "type it as JSON",
            param="answer",
        ) from exc
