"""A `StateStore` in a directory of files, behind `FileCheckpointStore`.

Logs are JSON-lines files opened for append (so an append writes only the new lines); values
are one JSON file each, replaced atomically through a temporary file. It serves one process;
for many processes use SQLite or PostgreSQL.

Files are ASCII JSON (lone surrogates are written escaped and read back as they were), read
with the nesting limit of `cantata.core.loads_json`: anything else on disk (damaged bytes,
text nested too deep, NaN) is a `StoreCorruptionError`, never a bare `ValueError` or
`RecursionError`. A key that cannot name a file (a lone surrogate) is a `StoreError`.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

from ..core import SerializationError, StoreError, check_json_depth, loads_json, short_repr
from ..stores import StoreCorruptionError

__all__ = ["FileStore"]


def _name(key: str) -> str:
    try:
        return quote(key, safe="") or "%00"
    except (UnicodeEncodeError, TypeError) as exc:
        raise StoreError(
            f"the key {short_repr(key)} cannot name a file: it is not a string of valid "
            "Unicode (a lone surrogate?); use keys and ids of valid text"
        ) from exc


def _load(raw: bytes, what: str) -> Any:
    try:
        return loads_json(raw, allow_surrogates=True, allow_nan=False)
    except SerializationError as exc:  # bad JSON, bad UTF-8, too deep, NaN
        raise StoreCorruptionError(f"{what} is corrupted: {exc}") from exc


def _dump(value: Any, what: str) -> str:
    try:
        check_json_depth(value)
        return json.dumps(value, separators=(",", ":"), allow_nan=False)
    except (SerializationError, ValueError, TypeError) as exc:
        raise StoreError(f"{what} cannot be written: it is not JSON data ({exc})") from exc


class FileStore:
    """Logs and values as files under one directory."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self._root = Path(directory)
        self._logs = self._root / "logs"
        self._values = self._root / "values"
        self._logs.mkdir(parents=True, exist_ok=True)
        self._values.mkdir(parents=True, exist_ok=True)
        self._lengths: dict[str, int] = {}
        self._closed = False

    def _check(self) -> None:
        if self._closed:
            raise StoreError(f"the file store at {self._root} is closed; open a new one")

    # -- logs --------------------------------------------------------------------------

    def _read_lines(self, log: str) -> list[Any]:
        return self._scan(log)[0]

    def _scan(self, log: str) -> tuple[list[Any], int]:
        """The entries of a log, and the size in bytes of its complete lines."""
        path = self._logs / (_name(log) + ".jsonl")
        out: list[Any] = []
        size = 0
        try:
            with path.open("rb") as f:
                for raw in f:
                    if not raw.endswith(b"\n"):
                        break  # a torn last line from a crash: it was never acknowledged
                    out.append(_load(raw, f"log {log!r} in {path}"))
                    size += len(raw)
        except FileNotFoundError:
            return [], 0
        except OSError as exc:
            raise StoreError(f"log {log!r} in {path} cannot be read: {exc}") from exc
        return out, size

    def _append(self, log: str, entries: Sequence[Any]) -> int:
        path = self._logs / (_name(log) + ".jsonl")
        length = self._lengths.get(log)
        try:
            if length is None:
                lines, size = self._scan(log)
                length = len(lines)
                if path.exists() and path.stat().st_size != size:
                    # drop a torn line, or the next append would be glued to it
                    os.truncate(path, size)
            text = "".join(_dump(e, f"an entry of log {log!r}") + "\n" for e in entries)
            with path.open("a", encoding="utf-8") as f:
                f.write(text)
        except OSError as exc:
            raise StoreError(f"log {log!r} in {path} cannot be written: {exc}") from exc
        length += len(entries)
        self._lengths[log] = length
        return length

    async def append(self, log: str, entries: Sequence[Any]) -> int:
        """Append entries (one JSON line each); returns the new length."""
        self._check()
        return await asyncio.to_thread(self._append, log, list(entries))

    async def read(self, log: str, start: int = 0, stop: int | None = None) -> list[Any]:
        """Entries `start` to `stop`."""
        self._check()
        return (await asyncio.to_thread(self._read_lines, log))[start:stop]

    async def length(self, log: str) -> int:
        """Number of entries."""
        self._check()
        return len(await asyncio.to_thread(self._read_lines, log))

    async def delete_log(self, log: str) -> None:
        """Remove a log."""
        self._check()
        path = self._logs / (_name(log) + ".jsonl")
        self._lengths.pop(log, None)
        path.unlink(missing_ok=True)

    # -- values ------------------------------------------------------------------------

    def _get(self, key: str) -> Any:
        path = self._values / (_name(key) + ".json")
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise StoreError(f"value {key!r} in {path} cannot be read: {exc}") from exc
        return _load(data, f"value {key!r} in {path}")

    def _put_many(self, items: Mapping[str, Any]) -> None:
        for key, value in items.items():
            path = self._values / (_name(key) + ".json")
            tmp = path.with_suffix(".tmp")
            text = _dump(value, f"value {key!r}")
            try:
                tmp.write_text(text, encoding="ascii")
                os.replace(tmp, path)
            except OSError as exc:
                raise StoreError(f"value {key!r} in {path} cannot be written: {exc}") from exc

    async def get(self, key: str) -> Any | None:
        """The value at key, or None."""
        self._check()
        return await asyncio.to_thread(self._get, key)

    async def put(self, key: str, value: Any) -> None:
        """Set a value."""
        await self.put_many({key: value})

    async def put_many(self, items: Mapping[str, Any]) -> None:
        """Set values, each replaced atomically, in order."""
        self._check()
        await asyncio.to_thread(self._put_many, dict(items))

    def _put_if_absent(self, key: str, value: Any) -> bool:
        path = self._values / (_name(key) + ".json")
        text = _dump(value, f"value {key!r}")
        # A complete file under a name of its own, then a hard link, which fails if the
        # name exists: readers never see a half-written value, and one of two writers wins.
        tmp = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.claim")
        try:
            tmp.write_text(text, encoding="ascii")
            try:
                os.link(tmp, path)
            except FileExistsError:
                return False
            finally:
                tmp.unlink(missing_ok=True)
        except OSError as exc:
            raise StoreError(f"value {key!r} in {path} cannot be written: {exc}") from exc
        return True

    async def put_if_absent(self, key: str, value: Any) -> bool:
        """Set a value unless the key holds one; True if this call set it."""
        self._check()
        return await asyncio.to_thread(self._put_if_absent, key, value)

    async def delete(self, key: str) -> None:
        """Remove a value."""
        self._check()
        (self._values / (_name(key) + ".json")).unlink(missing_ok=True)

    async def keys(self, prefix: str = "") -> list[str]:
        """Keys with this prefix, sorted."""
        self._check()
        names = [unquote(p.name[: -len(".json")]) for p in self._values.glob("*.json")]
        return sorted(k for k in names if k.startswith(prefix))

    async def close(self) -> None:
        """Refuse further use."""
        self._closed = True
