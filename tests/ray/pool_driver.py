"""A driver process for test_pool: its own `RayRuntime` joined to an existing pool, sending
increments to random counter agents until SIGTERM.

Run as ``python pool_driver.py ADDRESS POOL SEED AGENTS``. Prints ``ready`` once its
first increment is acknowledged, the number acknowledged so far after every
`PROGRESS_EVERY` more (so a test waits on progress, not on time), then, after SIGTERM,
one JSON line: ``{"acked": {index: n}, "doubtful": {index: n}}`` (doubtful: answered
with a typed error, so it may or may not have counted).
"""

from __future__ import annotations

import asyncio
import json
import random
import signal
import sys

import ray_agents as ra

from cantata.core import CantataError
from cantata.runtime import AgentId
from cantata.runtime.ray import RayRuntime

PROGRESS_EVERY = 25


async def main(address: str, pool: str, seed: int, agents: int) -> None:
    acked: dict[int, int] = {}
    doubtful: dict[int, int] = {}
    rng = random.Random(seed)
    count = 0  # acknowledged so far
    stop = asyncio.Event()
    async with RayRuntime(
        address=address, name=pool, default_timeout=30, init_options={"log_to_driver": False}
    ) as rt:
        # after Ray's start, which sets its own SIGTERM handler
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
        while not stop.is_set():
            i = rng.randrange(agents)
            try:
                await rt.send_message(ra.Add(1), AgentId("durable", f"d{i}"), timeout=20)
            except CantataError:
                doubtful[i] = doubtful.get(i, 0) + 1
            else:
                acked[i] = acked.get(i, 0) + 1
                count += 1
                if count == 1:
                    print("ready", flush=True)
                elif count % PROGRESS_EVERY == 0:
                    print(count, flush=True)
    print(json.dumps({"acked": acked, "doubtful": doubtful}), flush=True)


if __name__ == "__main__":
    address, pool, seed, agents = sys.argv[1:5]
    asyncio.run(main(address, pool, int(seed), int(agents)))
