"""One claiming process of the concurrency tests: opens its own store and claims keys.

Run with `runpy.run_path` in a spawned process, with the global CONFIG holding url,
options, writer, keys (how many) and out (a file to write the claimed key numbers to).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from cantata.stores import open_store

_config: dict[str, Any] = globals()["CONFIG"]


async def _claim(url: str, options: dict[str, Any], writer: int, keys: int) -> list[int]:
    async with open_store(url, **options) as store:
        return [n for n in range(keys) if await store.put_if_absent(f"claim:{n}", writer)]


_won = asyncio.run(_claim(_config["url"], _config["options"], _config["writer"], _config["keys"]))
Path(_config["out"]).write_text(json.dumps(_won), encoding="utf-8")
