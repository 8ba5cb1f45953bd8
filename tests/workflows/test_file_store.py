"""The file store behind FileCheckpointStore: appends only new lines, survives a torn line."""

from __future__ import annotations

from pathlib import Path

import pytest

from cantata.core import StoreError
from cantata.workflows._file_store import FileStore


async def test_logs_and_values_round_trip_and_reopen(tmp_path: Path) -> None:
    store = FileStore(tmp_path)
    assert await store.append("a/b:c", [1, {"x": [2]}]) == 2
    assert await store.append("a/b:c", ["three"]) == 3
    await store.put_many({"k:1": {"v": 1}, "k:2": [1, 2]})
    reopened = FileStore(tmp_path)
    assert await reopened.read("a/b:c") == [1, {"x": [2]}, "three"]
    assert await reopened.read("a/b:c", 1, 2) == [{"x": [2]}]
    assert await reopened.length("a/b:c") == 3
    assert await reopened.append("a/b:c", [4]) == 4
    assert await reopened.keys("k:") == ["k:1", "k:2"]
    assert await reopened.get("k:2") == [1, 2] and await reopened.get("nope") is None
    await reopened.delete("k:1")
    await reopened.delete_log("a/b:c")
    assert await reopened.keys() == ["k:2"] and await reopened.length("a/b:c") == 0
    await reopened.close()
    with pytest.raises(StoreError, match="closed"):
        await reopened.get("k:2")


async def test_a_torn_last_line_is_ignored_and_corruption_is_reported(tmp_path: Path) -> None:
    store = FileStore(tmp_path)
    await store.append("log", [1, 2])
    [path] = (tmp_path / "logs").iterdir()
    with path.open("a") as f:
        f.write('{"half":')  # a crash in the middle of an append
    assert await FileStore(tmp_path).read("log") == [1, 2]
    path.write_text("1\nnot json\n")
    with pytest.raises(StoreError, match="corrupted"):
        await FileStore(tmp_path).read("log")
    (tmp_path / "values" / "bad.json").write_text("{")
    with pytest.raises(StoreError, match="corrupted"):
        await FileStore(tmp_path).get("bad")


async def test_an_append_after_a_torn_line_replaces_it(tmp_path: Path) -> None:
    store = FileStore(tmp_path)
    await store.append("log", [1, 2])
    [path] = (tmp_path / "logs").iterdir()
    with path.open("a") as f:
        f.write('{"half":')  # a crash in the middle of an append
    reopened = FileStore(tmp_path)
    assert await reopened.append("log", [3]) == 3
    assert await FileStore(tmp_path).read("log") == [1, 2, 3]


async def test_unreadable_files_are_store_errors(tmp_path: Path) -> None:
    store = FileStore(tmp_path)
    await store.append("log", [1])
    await store.put("key", 1)
    [log] = (tmp_path / "logs").iterdir()
    [value] = (tmp_path / "values").iterdir()
    log.write_bytes(b"\xff\xfe\n")
    with pytest.raises(StoreError, match="log 'log'"):
        await FileStore(tmp_path).read("log")
    value.write_bytes(b"\xff\xfe")
    with pytest.raises(StoreError, match="value 'key'"):
        await FileStore(tmp_path).get("key")
    value.unlink()
    value.mkdir()  # anything the OS refuses to read
    with pytest.raises(StoreError, match="value 'key'"):
        await FileStore(tmp_path).get("key")
