"""Checkpoints carry integrity checks: any single damaged byte or value of a real saved
checkpoint is refused with CheckpointError or resumes to exactly the same run; the file
store refuses lone surrogates, deep JSON and damaged text with typed errors."""

from __future__ import annotations

import asyncio
import atexit
import importlib.util
import json
import shutil
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cantata.core import CheckpointError, StoreError
from cantata.stores import StoreCorruptionError, unseal
from cantata.workflows import FileCheckpointStore, WorkflowCheckpoint
from cantata.workflows._file_store import FileStore

HERE = Path(__file__).parent


def flows() -> ModuleType:
    """The shared workflow definitions of the checkpoint tests, loaded once."""
    name = "cantata_test_workflow_flows"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, HERE / "_flows.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


async def _outcome(directory: Path, checkpoint_id: str) -> Any:
    """What a resume from the checkpoint ends with: outputs and every committed value."""
    store = FileCheckpointStore(directory)
    try:
        result = await flows().build_pipeline().resume(checkpoint_id, checkpoint_store=store)
    finally:
        await store.close()
    state = result.run._state
    return (result.status, result.outputs, state.state, state.executor_states, state.logs)


_SAVED: dict[str, Any] = {}


def _saved() -> tuple[Path, str, Any]:
    """A real run saved once per session: its directory, a checkpoint in the middle (its
    fan-in buffer, state, executor state, logs and outputs all in use) and the outcome of
    resuming it undamaged."""
    if not _SAVED:
        directory = Path(tempfile.mkdtemp(prefix="cantata-ckpt-"))
        atexit.register(shutil.rmtree, directory, True)

        async def save() -> tuple[str, Any]:
            store = FileCheckpointStore(directory)
            run = await flows().build_pipeline().run("a b c", checkpoint_store=store)
            checkpoints = await store.list_checkpoints(run_id=run.run_id)
            await store.close()
            middle = checkpoints[4].checkpoint_id
            return middle, await _outcome(directory, middle)

        # In a thread of its own: the first caller may be an async test, inside a loop.
        with ThreadPoolExecutor(1) as pool:
            middle, outcome = pool.submit(asyncio.run, save()).result()
        _SAVED.update(directory=directory, middle=middle, outcome=outcome)
    return _SAVED["directory"], _SAVED["middle"], _SAVED["outcome"]


def _files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.rglob("*") if p.is_file())


def _resume_damaged(damage: Any) -> None:
    """Damage one file of the saved run, resume: refused or the very same outcome. (The
    file is put back afterwards: cheaper than a copy of the whole run per example.)"""
    directory, middle, outcome = _saved()
    originals: dict[Path, bytes] = _SAVED.setdefault(
        "originals", {p: p.read_bytes() for p in _files(directory)}
    )
    path = damage(list(originals))
    original = originals[path]
    try:
        got = asyncio.run(_outcome(directory, middle))
    except CheckpointError:
        return
    finally:
        path.write_bytes(original)
    assert got == outcome


@given(pick=st.integers(0, 10_000), offset=st.integers(0, 100_000), byte=st.integers(0, 255))
def test_a_damaged_byte_is_refused_or_resumes_identically(
    pick: int, offset: int, byte: int
) -> None:
    def damage(files: list[Path]) -> Path:
        path = files[pick % len(files)]
        data = bytearray(path.read_bytes())
        i = offset % len(data)
        data[i] = byte if byte != data[i] else (byte + 1) % 256
        path.write_bytes(bytes(data))
        return path

    _resume_damaged(damage)


def _leaves(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    if isinstance(value, dict):
        return [p for k in sorted(value) for p in _leaves(value[k], (*path, k))] or [path]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in _leaves(v, (*path, i))] or [path]
    return [path]


def _replace(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    copy = dict(value) if isinstance(value, dict) else list(value)
    copy[path[0]] = _replace(value[path[0]], path[1:], new)
    return copy


def _other(old: Any, seed: int) -> Any:
    """A different JSON value of a plausible kind."""
    if isinstance(old, bool):
        return not old
    if isinstance(old, int):
        return old + 1 + seed % 3
    if isinstance(old, str):
        return old[:-1] + chr(ord(old[-1]) ^ 1) if old else "x"
    return [None, 0, "", [], {}][seed % 5]


@given(pick=st.integers(0, 10_000), leaf=st.integers(0, 10_000), seed=st.integers(0, 100))
def test_a_damaged_value_is_refused_or_resumes_identically(pick: int, leaf: int, seed: int) -> None:
    def damage(files: list[Path]) -> Path:
        path = files[pick % len(files)]
        lines = path.read_text().splitlines()
        n = seed % len(lines)
        data = json.loads(lines[n])
        leaves = _leaves(data)
        where = leaves[leaf % len(leaves)]
        old: Any = data
        for key in where:
            old = old[key]
        lines[n] = json.dumps(_replace(data, where, _other(old, seed)))
        path.write_text(
            "".join(line + "\n" for line in lines) if path.suffix == ".jsonl" else lines[0]
        )
        return path

    _resume_damaged(damage)


def test_checkpoints_are_stored_sealed() -> None:
    directory, middle, _ = _saved()
    [record] = [p for p in _files(directory) if middle in p.name and "ckpt" in p.name]
    inner = unseal(json.loads(record.read_text()), where="the record")
    assert inner["schema_version"] == 2 and inner["checkpoint_id"] == middle


async def test_a_version_1_checkpoint_still_resumes(tmp_path: Path) -> None:
    """Unsealed, as version 1 wrote them: record, values and log entries."""
    directory, middle, outcome = _saved()
    shutil.copytree(directory, tmp_path / "v1")
    for path in _files(tmp_path / "v1"):
        if path.suffix == ".jsonl":
            lines = [json.loads(line) for line in path.read_text().splitlines()]
            path.write_text("".join(json.dumps(unseal(x, where="e")) + "\n" for x in lines))
        elif "wf%3Aidx" not in path.name:
            data = unseal(json.loads(path.read_text()), where="v")
            if "wf%3Ackpt" in path.name:
                data["schema_version"] = 1
            path.write_text(json.dumps(data))
    assert await _outcome(tmp_path / "v1", middle) == outcome


async def test_a_lone_surrogate_is_a_checkpoint_error(tmp_path: Path) -> None:
    store = FileCheckpointStore(tmp_path)
    with pytest.raises(CheckpointError, match="surrogate"):
        await store.load("\ud800")
    with pytest.raises(CheckpointError, match="surrogate"):
        await store.read_value("\ud800")
    with pytest.raises(CheckpointError, match="surrogate"):
        await store.read_log("a\udfff", 1)
    ckpt = WorkflowCheckpoint("c1", "run\ud800", "w", 1)
    with pytest.raises(CheckpointError, match="run"):
        await store.save(ckpt, values={}, log_appends={})
    with pytest.raises(StoreError, match="surrogate"):
        await FileStore(tmp_path).put("\ud800", 1)


async def test_the_file_store_refuses_deep_and_damaged_text_with_typed_errors(
    tmp_path: Path,
) -> None:
    store = FileStore(tmp_path)
    await store.put("deep", 1)
    await store.append("log", [1])
    [value] = (tmp_path / "values").iterdir()
    [log] = (tmp_path / "logs").iterdir()
    value.write_text("[" * 5000 + "]" * 5000)
    with pytest.raises(StoreCorruptionError, match="value 'deep'"):
        await store.get("deep")
    log.write_text("[" * 5000 + "]" * 5000 + "\n")
    with pytest.raises(StoreCorruptionError, match="log 'log'"):
        await store.read("log")
    value.write_text("NaN")
    with pytest.raises(StoreCorruptionError):
        await store.get("deep")
    deep: Any = []
    for _ in range(200):
        deep = [deep]
    with pytest.raises(StoreError, match="cannot be written"):
        await store.put("deep", deep)
    with pytest.raises(StoreError, match="cannot be written"):
        await store.append("log", [float("nan")])
    await store.put("s", "\ud800 kept")  # escaped on disk, read back as it was
    assert await store.get("s") == "\ud800 kept"
