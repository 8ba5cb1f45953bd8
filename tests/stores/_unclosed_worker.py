"""Opens a store, uses it and never closes it; the interpreter must still exit.

Run as ``python _unclosed_worker.py URL OPTIONS_JSON MODE``: MODE ``return`` leaves
normally, ``raise`` fails before a `close()` would have run, ``unawaited`` leaves an
operation pending when the loop ends.
"""

from __future__ import annotations

import asyncio
import json
import sys

from cantata.stores import open_store

pending: list[asyncio.Future[object]] = []


async def main(url: str, options: dict[str, object], mode: str) -> None:
    store = open_store(url, **options)
    await store.put("k", {"v": 1})
    await store.append("log", [1, 2])
    if await store.get("k") != {"v": 1}:
        raise SystemExit(3)
    if mode == "raise":
        raise RuntimeError("failed before close")
    if mode == "unawaited":
        pending.append(asyncio.ensure_future(store.read("log")))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]))
