"""A writer that is killed mid-run by the crash test.

Run with `runpy.run_path` in a spawned process, with the global CONFIG holding url,
options, log and progress (a file path). It appends batches of 10 entries forever and,
after each append returns, writes the log's length to the progress file.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

from cantata.stores import open_store

_config: dict[str, Any] = globals()["CONFIG"]


async def _main(url: str, options: dict[str, Any], log: str, progress: str) -> None:
    path = Path(progress)
    async with open_store(url, **options) as store:
        n = 0
        while True:
            length = await store.append(log, list(range(n, n + 10)))
            n += 10
            tmp = path.with_suffix(".tmp")
            tmp.write_text(str(length))
            os.replace(tmp, path)


asyncio.run(_main(**_config))
