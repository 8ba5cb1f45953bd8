"""The checkpoint record: what a run looks like at a superstep boundary, as JSON.

A record is small on purpose. Shared state and executor state are stored once per change
as separate values and the record holds references to them; logs (conversations, outputs)
are append-only store logs and the record holds their lengths. So one checkpoint costs what
changed in the superstep, not the size of everything saved so far.

Schema versions:
  1: first version (messages, fan-in buffers, state and executor refs, requests, log
     segments, output segments, lineage). A request may carry ``response_type`` (a type
     name) when it asked for another answer type than its handler's; records without it
     read as before, so the version stayed. Likewise ``graph``, a fingerprint of the
     workflow's edges, checked on restore when present, and ``fan_in_refs``.
  2: the record is stored sealed (`cantata.stores.seal`: the SHA-256 of its canonical
     JSON beside it), and so is every value and log entry it points to, so damage that
     still parses is refused instead of resumed. Version 1 records (unsealed, as are
     their values and entries) still load, without that check.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..core import CheckpointError, short_repr

__all__ = ["SCHEMA_VERSION", "WorkflowCheckpoint"]

SCHEMA_VERSION = 2
_LEGACY_VERSION = 1

Segments = list[tuple[str, int]]
"""A logical log: the first `count` entries of each named store log, in order."""


@dataclass(slots=True)
class WorkflowCheckpoint:
    """One saved superstep boundary of a run. Values are JSON data (see `cantata.core`)."""

    checkpoint_id: str
    run_id: str
    workflow_name: str
    superstep: int
    parent_id: str | None = None
    created_at: str = ""
    status: str = "in_progress"
    messages: list[dict[str, Any]] = field(default_factory=list)
    """In-flight deliveries: ``{"target", "sources", "message"}`` (message as JSON data);
    agent responses hold their conversation as a reference into a log: ``"conversation"``
    for one, ``"conversations"`` (one reference or null per item) for a fan-in's list."""
    fan_in: dict[str, dict[str, list[Any]]] = field(default_factory=dict)
    fan_in_refs: dict[str, dict[str, list[Any]]] = field(default_factory=dict)
    """Conversation references of buffered agent responses, as for ``messages`` (one
    reference or null per buffered message; groups and sources without any are left out)."""
    state_refs: dict[str, str] = field(default_factory=dict)
    executor_refs: dict[str, str] = field(default_factory=dict)
    requests: list[dict[str, Any]] = field(default_factory=list)
    logs: dict[str, Segments] = field(default_factory=dict)
    outputs: Segments = field(default_factory=list)
    executor_ids: list[str] = field(default_factory=list)
    graph: str = ""
    """A fingerprint of the workflow's edges ("" in records written before it existed)."""
    sealed: bool = True
    """Whether the values and log entries it points to are sealed (schema version 2)."""

    @property
    def pending_request_ids(self) -> list[str]:
        """Ids of the requests for input waiting for an answer at this checkpoint."""
        return [r["request_id"] for r in self.requests]

    def to_record(self) -> dict[str, Any]:
        """The JSON record written to the store (sealed by the store)."""
        return {
            "schema_version": SCHEMA_VERSION if self.sealed else _LEGACY_VERSION,
            "checkpoint_id": self.checkpoint_id,
            "run_id": self.run_id,
            "workflow_name": self.workflow_name,
            "superstep": self.superstep,
            "parent_id": self.parent_id,
            "created_at": self.created_at,
            "status": self.status,
            "messages": self.messages,
            "fan_in": self.fan_in,
            "fan_in_refs": self.fan_in_refs,
            "state_refs": self.state_refs,
            "executor_refs": self.executor_refs,
            "requests": self.requests,
            "logs": {k: [list(s) for s in v] for k, v in self.logs.items()},
            "outputs": [list(s) for s in self.outputs],
            "executor_ids": self.executor_ids,
            "graph": self.graph,
        }

    @classmethod
    def from_record(
        cls, record: Any, *, checkpoint_id: str, sealed: bool = True
    ) -> WorkflowCheckpoint:
        """Check and read a record (unsealed already when `sealed`: then it must be of
        the current version, else of version 1); damage raises `CheckpointError`."""
        where = f"checkpoint {checkpoint_id!r}"
        if not isinstance(record, dict):
            raise CheckpointError(f"{where} is damaged: its record is not a JSON object")
        version = record.get("schema_version")
        expected = SCHEMA_VERSION if sealed else _LEGACY_VERSION
        if version != expected:
            if version in (SCHEMA_VERSION, _LEGACY_VERSION):
                found = "found sealed" if sealed else "found without a seal"
                rule = "always" if version == SCHEMA_VERSION else "never"
                raise CheckpointError(
                    f"{where} is damaged: its record says version {version}, which is {rule} "
                    f"stored sealed, but it was {found}"
                )
            raise CheckpointError(
                f"{where} has schema_version {short_repr(version)}; this code reads versions "
                f"{_LEGACY_VERSION} and {SCHEMA_VERSION}: resume it with the cantata version "
                "that wrote it"
            )
        try:
            ckpt = cls(
                checkpoint_id=_typed(record, "checkpoint_id", str),
                run_id=_nonempty(record, "run_id"),
                workflow_name=_typed(record, "workflow_name", str),
                superstep=_typed(record, "superstep", int),
                parent_id=_optional_str(record, "parent_id"),
                created_at=_typed(record, "created_at", str),
                status=_typed(record, "status", str),
                messages=_messages(record),
                fan_in=_fan_in(record),
                fan_in_refs=_fan_in(record, "fan_in_refs", optional=True),
                state_refs=_str_map(record, "state_refs"),
                executor_refs=_str_map(record, "executor_refs"),
                requests=_requests(record),
                logs={k: _segments(v, k) for k, v in _typed(record, "logs", dict).items()},
                outputs=_segments(record.get("outputs"), "outputs"),
                executor_ids=_str_list(record.get("executor_ids"), "executor_ids"),
                graph=_optional_str(record, "graph") or "",
                sealed=sealed,
            )
        except CheckpointError as exc:
            raise CheckpointError(f"{where} is damaged: {exc}") from None
        if ckpt.checkpoint_id != checkpoint_id:
            raise CheckpointError(f"{where} is damaged: it names itself {ckpt.checkpoint_id!r}")
        return ckpt


def _typed(record: dict[str, Any], key: str, kind: type) -> Any:
    value = record.get(key)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise CheckpointError(f"field {key!r} must be a {kind.__name__}")
    return value


def _nonempty(record: dict[str, Any], key: str) -> str:
    value = _typed(record, key, str)
    if not value:
        raise CheckpointError(f"field {key!r} must not be empty")
    return str(value)


def _optional_str(record: dict[str, Any], key: str) -> str | None:
    value = record.get(key)
    if value is not None and not isinstance(value, str):
        raise CheckpointError(f"field {key!r} must be a string or null")
    return value


def _str_list(value: Any, key: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise CheckpointError(f"field {key!r} must be a list of strings")
    return value


def _str_map(record: dict[str, Any], key: str) -> dict[str, str]:
    value = _typed(record, key, dict)
    if not all(isinstance(v, str) for v in value.values()):
        raise CheckpointError(f"field {key!r} must map names to reference strings")
    return dict(value)


def _segments(value: Any, key: str) -> Segments:
    if not isinstance(value, list):
        raise CheckpointError(f"log {key!r} must be a list of [name, count] segments")
    out: Segments = []
    for seg in value:
        if (
            not isinstance(seg, list)
            or len(seg) != 2
            or not isinstance(seg[0], str)
            or not isinstance(seg[1], int)
            or isinstance(seg[1], bool)
            or seg[1] < 0
        ):
            raise CheckpointError(f"log {key!r} has a malformed segment {short_repr(seg)}")
        out.append((seg[0], seg[1]))
    return out


def _messages(record: dict[str, Any]) -> list[dict[str, Any]]:
    items = _typed(record, "messages", list)
    for item in items:
        if (
            not isinstance(item, dict)
            or not isinstance(item.get("target"), str)
            or "message" not in item
        ):
            raise CheckpointError("field 'messages' holds a malformed delivery")
        _str_list(item.get("sources"), "messages.sources")
    return list(items)


def _fan_in(
    record: dict[str, Any], key: str = "fan_in", *, optional: bool = False
) -> dict[str, dict[str, list[Any]]]:
    if optional and record.get(key) is None:
        return {}
    value = _typed(record, key, dict)
    for buffers in value.values():
        if not isinstance(buffers, dict) or not all(isinstance(v, list) for v in buffers.values()):
            raise CheckpointError(f"field {key!r} must map groups to {{source: [items]}}")
    return dict(value)


def _requests(record: dict[str, Any]) -> list[dict[str, Any]]:
    items = _typed(record, "requests", list)
    for item in items:
        if (
            not isinstance(item, dict)
            or not isinstance(item.get("request_id"), str)
            or not isinstance(item.get("executor_id"), str)
            or "data" not in item
        ):
            raise CheckpointError("field 'requests' holds a malformed request")
    return list(items)
