"""Server-side conversations with a rolling id: each response id names the thread so far.

A conversation is an append-only log of messages in the server's store; a response is a
record ``resp:<id>`` that points at a prefix of a log (its name and length). Continuing
from a response appends to its log when nothing was appended since; otherwise (a second
answer to the same response: a branch) the prefix is copied into a new log first. The
check is the store's atomic append, which returns the new length, so two servers sharing
one store never interleave two branches in one log.

Records carry ``schema_version`` (1: model, log, length, created_at, response).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from ..core import Message, SerializationError, from_json, new_id, to_json
from ..stores import StateStore, StoreCorruptionError
from .errors import RequestError

__all__ = ["RESPONSE_SCHEMA_VERSION", "ResponseRecord", "ResponseThreads"]

RESPONSE_SCHEMA_VERSION = 1
_RECORD = "resp:"
_LOG = "conv:"


@dataclass(frozen=True, slots=True)
class ResponseRecord:
    """A stored response: the thread up to it is ``log[:length]``."""

    id: str
    model: str
    log: str
    length: int
    created_at: int
    response: dict[str, Any]


class ResponseThreads:
    """The rolling-id conversations of one server, kept in `store`."""

    def __init__(self, store: StateStore) -> None:
        self.store = store

    @staticmethod
    def new_id() -> str:
        """A fresh response id (``resp_`` and 32 hex digits, as OpenAI's look)."""
        return f"resp_{new_id().replace('-', '')}"

    async def get(self, response_id: str) -> ResponseRecord:
        """The record of `response_id`; unknown ids are a 404 naming it."""
        if not _valid_id(response_id):
            raise RequestError(
                f"response id {response_id[:80]!r} is not one this server gives out",
                status=404,
                param="previous_response_id",
            )
        data = await self.store.get(_RECORD + response_id)
        if data is None:
            raise RequestError(
                f"no response {response_id!r} is stored here (it was never stored, was "
                "deleted, or belongs to another server); start a new conversation without "
                "previous_response_id",
                status=404,
                param="previous_response_id",
            )
        return _record(response_id, data)

    async def history(self, record: ResponseRecord) -> list[Message]:
        """The messages of the thread up to `record`, oldest first."""
        entries = await self.store.read(record.log, 0, record.length)
        if len(entries) != record.length:
            raise StoreCorruptionError(
                f"the conversation of response {record.id!r} lost messages ({len(entries)} of "
                f"{record.length} in log {record.log!r})"
            )
        try:
            messages = [from_json(e) for e in entries]
        except SerializationError as exc:
            raise StoreCorruptionError(
                f"the conversation of response {record.id!r} cannot be read: {exc}"
            ) from exc
        if any(type(m) is not Message for m in messages):
            raise StoreCorruptionError(f"the log of response {record.id!r} holds non-messages")
        return messages

    async def save(
        self,
        response_id: str,
        *,
        model: str,
        previous: ResponseRecord | None,
        new: list[Message],
        response: dict[str, Any],
    ) -> ResponseRecord:
        """Store `new` after `previous`'s thread and the record naming it all."""
        entries = [to_json(m) for m in new]
        log, length = await self._append(previous, entries)
        record = ResponseRecord(response_id, model, log, length, int(time.time()), response)
        await self.store.put(
            _RECORD + response_id,
            {
                "schema_version": RESPONSE_SCHEMA_VERSION,
                "model": model,
                "log": log,
                "length": length,
                "created_at": record.created_at,
                "response": response,
            },
        )
        return record

    async def _append(self, previous: ResponseRecord | None, entries: list[Any]) -> tuple[str, int]:
        if previous is not None:
            if await self.store.length(previous.log) == previous.length:
                after = await self.store.append(previous.log, entries)
                if after == previous.length + len(entries):
                    return previous.log, after
                # another writer appended in between: our entries there are past every
                # record's prefix, so they are never read; branch below
            prefix = await self.store.read(previous.log, 0, previous.length)
        else:
            prefix = []
        log = _LOG + new_id()
        return log, await self.store.append(log, [*prefix, *entries])

    async def delete(self, response_id: str) -> None:
        """Forget a response (its thread stays readable from later responses)."""
        await self.get(response_id)
        await self.store.delete(_RECORD + response_id)


def _valid_id(value: str) -> bool:
    return (
        value.startswith("resp_")
        and 5 < len(value) <= 80
        and all(c.isascii() and (c.isalnum() or c in "_-") for c in value)
    )


def _record(response_id: str, data: Any) -> ResponseRecord:
    ok = (
        type(data) is dict
        and data.get("schema_version") == RESPONSE_SCHEMA_VERSION
        and type(data.get("model")) is str
        and type(data.get("log")) is str
        and type(data.get("length")) is int
        and type(data.get("created_at")) is int
        and type(data.get("response")) is dict
    )
    if not ok:
        raise StoreCorruptionError(
            f"the stored record of response {response_id!r} is damaged or of an unknown "
            f"schema version (this server reads version {RESPONSE_SCHEMA_VERSION})"
        )
    return ResponseRecord(
        response_id,
        data["model"],
        data["log"],
        data["length"],
        data["created_at"],
        data["response"],
    )
