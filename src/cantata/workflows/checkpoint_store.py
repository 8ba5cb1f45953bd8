"""Checkpoint stores: where runs save their superstep boundaries.

Every store is one `StateStore` from `cantata.stores` underneath (memory, a directory of
files, SQLite, PostgreSQL, ...), used as logs and keyed values:

- ``wf:ckpt:<id>``: the checkpoint record (small: references and lengths), sealed with its
  SHA-256 (`cantata.stores.seal`; values and log entries are sealed by the checkpointing),
- ``wf:idx:<run id>:<superstep>:<id>``: the run's checkpoints, in order,
- ``wf:val:<ref>``: one shared-state or executor-state value, written when it changed,
- log ``wf:log:<segment>``: append-only logs (conversations, outputs), appended per checkpoint,
- ``wf:fx:<run id>:...``: the run's journaled effects (see `journal`),
- ``wf:claim:<id>``: set once by the answer that took the run waiting at that checkpoint
  (with its deadline, under a claim lease).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

from ..core import (
    AlreadyAnsweredError,
    CheckpointError,
    ConfigurationError,
    StoreError,
    short_repr,
)
from ..stores import MemoryStore, StateStore, seal, take_claim, unseal
from ._file_store import FileStore
from .checkpoint import WorkflowCheckpoint

__all__ = [
    "CheckpointStore",
    "FileCheckpointStore",
    "InMemoryCheckpointStore",
    "StateStoreCheckpointStore",
]

_log = logging.getLogger("cantata.workflows.checkpoints")


@runtime_checkable
class CheckpointStore(Protocol):
    """What a run needs from a checkpoint store. To add a backend, write a `StateStore`
    and wrap it in `StateStoreCheckpointStore`."""

    async def save(
        self,
        checkpoint: WorkflowCheckpoint,
        *,
        values: Mapping[str, Any],
        log_appends: Mapping[str, tuple[int, list[Any]]],
    ) -> None:
        """Write new values, append to logs (each at its expected length), then the record."""
        ...

    async def load(self, checkpoint_id: str) -> WorkflowCheckpoint:
        """The checkpoint; `CheckpointError` when it is unknown or damaged."""
        ...

    async def read_value(self, ref: str) -> Any:
        """A value written by `save` (JSON data)."""
        ...

    async def read_log(self, segment: str, count: int) -> list[Any]:
        """The first `count` entries of a log segment (JSON data)."""
        ...

    async def list_checkpoints(self, *, run_id: str | None = None) -> list[WorkflowCheckpoint]:
        """Checkpoints of one run (in superstep order), or of every run."""
        ...


class StateStoreCheckpointStore:
    """Checkpoints in any `cantata.stores.StateStore` (SQLite, PostgreSQL, memory, ...).

    `claim_lease` bounds how long a claim on a waiting run (`claim`) keeps other answers
    out when its holder never finishes: a server whose runs are bounded by a request timeout
    sets it a little longer, so a session claimed by a process that died is answerable
    again afterwards. None (the default): a claim holds until the run ends."""

    def __init__(self, store: StateStore, *, claim_lease: float | None = None) -> None:
        if claim_lease is not None and not claim_lease > 0:
            raise ConfigurationError(
                f"claim_lease must be a positive number of seconds, got {claim_lease!r}"
            )
        self.store = store
        self.claim_lease = claim_lease

    async def save(
        self,
        checkpoint: WorkflowCheckpoint,
        *,
        values: Mapping[str, Any],
        log_appends: Mapping[str, tuple[int, list[Any]]],
    ) -> None:
        """Write what changed: new values, new log entries, then the small record.

        A store that refuses to write (an id it cannot take, a full disk) is a
        `CheckpointError` naming the checkpoint and run.
        """
        try:
            await self._save(checkpoint, values, log_appends)
        except StoreError as exc:
            raise CheckpointError(
                f"checkpoint {checkpoint.checkpoint_id!r} of run {short_repr(checkpoint.run_id)} "
                f"cannot be saved: {exc}"
            ) from exc

    async def _save(
        self,
        checkpoint: WorkflowCheckpoint,
        values: Mapping[str, Any],
        log_appends: Mapping[str, tuple[int, list[Any]]],
    ) -> None:
        for segment, (expected, entries) in log_appends.items():
            if not entries:
                continue
            length = await self.store.append(f"wf:log:{segment}", entries)
            if length != expected + len(entries):
                raise CheckpointError(
                    f"log segment {segment!r} of run {checkpoint.run_id!r} has {length} entries "
                    f"after an append that should have left {expected + len(entries)}: another "
                    "writer used it; resume this run from its last checkpoint"
                )
        items: dict[str, Any] = {f"wf:val:{ref}": value for ref, value in values.items()}
        ckpt_id = checkpoint.checkpoint_id
        items[f"wf:idx:{checkpoint.run_id}:{checkpoint.superstep:09d}:{ckpt_id}"] = ckpt_id
        record = checkpoint.to_record()
        items[f"wf:ckpt:{ckpt_id}"] = seal(record) if checkpoint.sealed else record
        await self.store.put_many(items)

    async def load(self, checkpoint_id: str) -> WorkflowCheckpoint:
        """The checkpoint with this id; `CheckpointError` when unknown or damaged."""
        where = f"checkpoint {short_repr(checkpoint_id)}"
        try:
            data = await self.store.get(f"wf:ckpt:{checkpoint_id}")
            if data is None:
                raise CheckpointError(
                    f"no {where} in this store; list them with list_checkpoints()"
                )
            if isinstance(data, dict) and "schema_version" in data:  # version 1: unsealed
                return WorkflowCheckpoint.from_record(
                    data, checkpoint_id=checkpoint_id, sealed=False
                )
            record = unseal(data, where=where)
        except StoreError as exc:
            raise CheckpointError(f"{where} cannot be read: {exc}") from exc
        return WorkflowCheckpoint.from_record(record, checkpoint_id=checkpoint_id)

    async def read_value(self, ref: str) -> Any:
        """A value written by `save`; `CheckpointError` when it is missing."""
        try:
            value = await self.store.get(f"wf:val:{ref}")
        except StoreError as exc:
            raise CheckpointError(
                f"checkpoint value {short_repr(ref)} cannot be read: {exc}"
            ) from exc
        if value is None:
            raise CheckpointError(f"checkpoint value {short_repr(ref)} is missing from the store")
        return value

    async def read_log(self, segment: str, count: int) -> list[Any]:
        """The first `count` entries of a segment; `CheckpointError` when some are missing."""
        try:
            entries = await self.store.read(f"wf:log:{segment}", 0, count)
        except StoreError as exc:
            raise CheckpointError(
                f"checkpoint log {short_repr(segment)} cannot be read: {exc}"
            ) from exc
        if len(entries) != count:
            raise CheckpointError(
                f"checkpoint log {short_repr(segment)} has {len(entries)} entries, the "
                f"checkpoint expects {count}"
            )
        return entries

    async def list_checkpoints(self, *, run_id: str | None = None) -> list[WorkflowCheckpoint]:
        """Checkpoints of one run in superstep order, or of every run by run and superstep."""
        prefix = "wf:idx:" if run_id is None else f"wf:idx:{run_id}:"
        keys = await self.store.keys(prefix)
        return [await self.load(key.rsplit(":", 1)[1]) for key in keys]

    async def claim(self, checkpoint_id: str) -> None:
        """Take the run waiting at this checkpoint for one answer, atomically across every
        process on the store (the backend's put-if-absent): of two answers sent at once to
        two servers, one goes on, the other gets `AlreadyAnsweredError`. The claim goes
        with the run (`delete_run`); a checkpoint already gone was answered and finished."""
        try:
            taken = await self._take(f"wf:claim:{checkpoint_id}")
            present = taken and await self.store.get(f"wf:ckpt:{checkpoint_id}") is not None
        except StoreError as exc:
            raise CheckpointError(
                f"checkpoint {short_repr(checkpoint_id)} cannot be claimed: {exc}"
            ) from exc
        if taken and not present:
            await self.store.delete(f"wf:claim:{checkpoint_id}")
        if not (taken and present):
            raise AlreadyAnsweredError(
                f"the session waiting at checkpoint {short_repr(checkpoint_id)} was answered "
                "by another request; read the conversation again for where it stands"
            )

    async def _take(self, key: str) -> bool:
        """Put-if-absent of a claim; with a lease, a claim past its deadline (its holder
        died) is taken over, by one caller (`take_claim`)."""
        return await take_claim(self.store, key, lease=self.claim_lease)

    async def release(self, checkpoint_id: str) -> None:
        """Give back a claim whose answer did not go on (refused before the run took it)."""
        await self.store.delete(f"wf:claim:{checkpoint_id}")

    async def delete_run(self, run_id: str) -> int:
        """Remove a run's checkpoints, their claims, the values and log segments they point
        to, and its journaled effects (``wf:fx:<run id>:...``); returns how many checkpoints
        went. For a run whose session has ended: a
        run forked from one of its checkpoints shares values with it and must end first.
        Safe to repeat after a failure part way (the index goes last)."""
        index = await self.store.keys(f"wf:idx:{run_id}:")
        values: set[str] = set()
        logs: set[str] = set()
        records: list[str] = []
        for key in index:
            ckpt_id = key.rsplit(":", 1)[1]
            records += [f"wf:ckpt:{ckpt_id}", f"wf:claim:{ckpt_id}"]
            try:
                ckpt = await self.load(ckpt_id)
            except CheckpointError:
                continue  # damaged or half deleted: its record and index still go
            values.update(ckpt.state_refs.values(), ckpt.executor_refs.values())
            logs.update(name for segments in ckpt.logs.values() for name, _ in segments)
            logs.update(name for name, _ in ckpt.outputs)
        for log in sorted(logs):
            await self.store.delete_log(f"wf:log:{log}")
        effects = await self.store.keys(f"wf:fx:{run_id}:")
        for key in [*(f"wf:val:{ref}" for ref in sorted(values)), *effects, *records, *index]:
            await self.store.delete(key)
        return len(index)

    async def close(self) -> None:
        """Close the underlying store."""
        await self.store.close()


class InMemoryCheckpointStore(StateStoreCheckpointStore):
    """Checkpoints in memory: for tests and runs that need only in-process resume."""

    def __init__(self) -> None:
        super().__init__(MemoryStore())


class FileCheckpointStore(StateStoreCheckpointStore):
    """Checkpoints as files in a directory: JSON you can read, no database needed."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        super().__init__(FileStore(directory))
        self.directory = directory
