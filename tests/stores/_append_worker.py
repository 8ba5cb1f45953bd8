"""One writer process of the concurrency tests: opens its own store and appends in order.

Run with `runpy.run_path` in a spawned process, with the global CONFIG holding stores (a
list of [url, options]), log, batch_log, writer, count and batch (a file, not a module, so
that no import path is needed). On each store, concurrently, it appends `count` single
entries to `log`, then `count` entries in appends of `batch` to `batch_log`.
"""

from __future__ import annotations

import asyncio
from typing import Any

from cantata.stores import open_store

_config: dict[str, Any] = globals()["CONFIG"]


async def _write(
    url: str, options: dict[str, Any], log: str, batch_log: str, writer: int, count: int, batch: int
) -> None:
    async with open_store(url, **options) as store:
        for n in range(count):
            await store.append(log, [[writer, n]])
        for n in range(0, count, batch):
            await store.append(batch_log, [[writer, m] for m in range(n, min(n + batch, count))])


async def _main(stores: list[tuple[str, dict[str, Any]]], **rest: Any) -> None:
    await asyncio.gather(*(_write(url, options, **rest) for url, options in stores))


asyncio.run(_main(**_config))
