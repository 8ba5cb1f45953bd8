"""Runs started from the dev UI: their events kept in order for any number of watchers.

A run of a workflow or team goes on in a task of its own; its events (as JSON) are
appended to a `DevRun`'s log, and each server-sent-events watcher reads the log from where
it stands, so a page that reconnects (``Last-Event-ID``) misses nothing. Answers to
requests for input and resumes from a checkpoint continue the same log. The registry
cancels what is still running when the app stops.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

from ..core import new_id
from ..workflows import CheckpointStore, RequestInfoEvent, WorkflowEvent
from .errors import RequestError
from .served import Served

__all__ = ["DevRun", "RunRegistry", "event_json"]

_MAX_TEXT = 2000
_MAX_RUNS = 200
_DONE = frozenset({"idle", "idle_with_pending_requests", "failed", "cancelled"})


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

    def __init__(self, served: Served, store: CheckpointStore) -> None:
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
            "pending": [
                {
                    "request_id": r.request_id,
                    "executor_id": r.executor_id,
                    "data": _plain(r.data),
                    "response_type": _plain(r.response_type),
                }
                for r in self.pending
            ],
        }

    async def _add(self, item: Any) -> None:
        data = event_json(item)
        if isinstance(item, WorkflowEvent) and data.get("type") == "WorkflowStartedEvent":
            self.run_id = data.get("run_id") or self.run_id
        if data.get("type") == "StatusEvent":
            self.status = str(data.get("status"))
        async with self._changed:
            self.events.append(data)
            self._changed.notify_all()

    def start(self, work: Callable[[DevRun], Any]) -> None:
        """Run `work(self)` (an async generator of events) in a task of its own."""
        if self.busy:
            raise RequestError(
                f"run {self.id!r} of {self.served.name!r} is still going: wait for it to stop "
                "before answering or resuming it",
                status=409,
            )
        self.status = "in_progress"
        self._running = True
        self._task = asyncio.create_task(self._drive(work), name=f"devui-run-{self.id}")

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
            async with self._changed:
                try:
                    await asyncio.wait_for(self._changed.wait_for(self._past(sent)), wait)
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


class RunRegistry:
    """The dev UI's runs in this process, by id (the oldest stopped ones are dropped past
    a bound)."""

    def __init__(self) -> None:
        self._runs: dict[str, DevRun] = {}

    def add(self, run: DevRun) -> DevRun:
        """Keep `run`, dropping the oldest stopped runs past the bound."""
        self._runs[run.id] = run
        for rid in [r.id for r in self._runs.values() if not r.busy and r is not run]:
            if len(self._runs) <= _MAX_RUNS:
                break
            del self._runs[rid]
        return run

    def get(self, run_id: str) -> DevRun:
        """The run, or a 404 naming it."""
        run = self._runs.get(run_id)
        if run is None:
            raise RequestError(
                f"no dev UI run {run_id!r} on this server (runs live in the server process; "
                "start one from the page)",
                status=404,
                param="run_id",
            )
        return run

    def all(self) -> list[DevRun]:
        """Every run kept, newest last."""
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
