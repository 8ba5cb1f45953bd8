"""A2A tasks kept in the server's cantata store, so `tasks/get` answers after a restart.

Each task is one value, ``a2a:task:<id>``: its protobuf JSON (the A2A wire form) with a
``schema_version``. Listing reads every task key; a server holding very many tasks
should list by context (``contextId``), which still scans, so keep listing for tools
and tests, not for hot paths.

Records carry ``schema_version`` (1: ``task``, the task as A2A JSON).
"""

from __future__ import annotations

from typing import Any

from a2a.server.context import ServerCallContext
from a2a.server.tasks import TaskStore
from a2a.types.a2a_pb2 import ListTasksRequest, ListTasksResponse, Task
from a2a.utils.constants import DEFAULT_LIST_TASKS_PAGE_SIZE
from a2a.utils.errors import InvalidParamsError
from google.protobuf.json_format import MessageToDict, ParseDict, ParseError  # type: ignore[import-untyped]

from ..stores import StateStore, StoreCorruptionError

__all__ = ["A2A_TASK_SCHEMA_VERSION", "StoreTaskStore"]

A2A_TASK_SCHEMA_VERSION = 1
_PREFIX = "a2a:task:"
_MAX_ID = 200


class StoreTaskStore(TaskStore):
    """The a2a-sdk `TaskStore` on a cantata `StateStore` (memory, SQLite, PostgreSQL, Redis).

    On a `cantata serve` app the store is the identity's own view (`OwnedStore`): each
    identity lists, gets and cancels only the tasks it made."""

    def __init__(self, store: StateStore, *, prefix: str = _PREFIX) -> None:
        self._store = store
        self._prefix = prefix

    async def save(self, task: Task, context: ServerCallContext | None = None) -> None:
        """Store `task` whole (the SDK saves after every event)."""
        await self._store.put(
            self._prefix + task.id,
            {"schema_version": A2A_TASK_SCHEMA_VERSION, "task": MessageToDict(task)},
        )

    async def get(self, task_id: str, context: ServerCallContext | None = None) -> Task | None:
        """The task, or None when no task has that id (or the id could not be one)."""
        if not _plausible(task_id):
            return None
        return _task(task_id, await self._store.get(self._prefix + task_id))

    async def delete(self, task_id: str, context: ServerCallContext | None = None) -> None:
        """Forget a task."""
        if _plausible(task_id):
            await self._store.delete(self._prefix + task_id)

    async def list(
        self, params: ListTasksRequest, context: ServerCallContext | None = None
    ) -> ListTasksResponse:
        """Tasks newest first, filtered by context and state, a page at a time (the page
        token is the offset of the next page)."""
        tasks = []
        for key in await self._store.keys(self._prefix):
            task = _task(key[len(self._prefix) :], await self._store.get(key))
            if task is None:
                continue
            if params.context_id and task.context_id != params.context_id:
                continue
            if params.status and task.status.state != params.status:
                continue
            tasks.append(task)
        tasks.sort(key=lambda t: (t.status.timestamp.ToNanoseconds(), t.id), reverse=True)
        start = _offset(params.page_token, len(tasks))
        size = params.page_size or DEFAULT_LIST_TASKS_PAGE_SIZE
        page = tasks[start : start + size]
        following = start + size
        return ListTasksResponse(
            tasks=page,
            next_page_token=str(following) if following < len(tasks) else "",
            total_size=len(tasks),
            page_size=size,
        )


def _plausible(task_id: str) -> bool:
    return 0 < len(task_id) <= _MAX_ID and task_id.isprintable()


def _offset(token: str, total: int) -> int:
    if not token:
        return 0
    if not token.isdigit() or int(token) > total:
        raise InvalidParamsError(
            message=f"page token {token[:40]!r} is not one this server gave out; list "
            "again without a page token"
        )
    return int(token)


def _task(task_id: str, data: Any) -> Task | None:
    if data is None:
        return None
    if (
        type(data) is not dict
        or data.get("schema_version") != A2A_TASK_SCHEMA_VERSION
        or type(data.get("task")) is not dict
    ):
        raise StoreCorruptionError(
            f"the stored A2A task {task_id!r} is damaged or of an unknown schema version "
            f"(this server reads version {A2A_TASK_SCHEMA_VERSION})"
        )
    try:
        task: Task = ParseDict(data["task"], Task(), ignore_unknown_fields=True)
        return task
    except ParseError as exc:
        raise StoreCorruptionError(
            f"the stored A2A task {task_id!r} cannot be read: {exc}"
        ) from exc
