"""Soak: a long-running process stays flat. Many conversations, one after another, each
a team session that runs once and ends, and what the process holds at the start, the
middle and the end of them (after a collection):

1. 100,000 team sessions on one `LocalRuntime` (quick: 10,000): the runtime's live agents
   and this process's RSS;
2. 10,000 team sessions on one `RayRuntime` of a two-node cluster on 127.0.0.1, two host
   processes a node (quick: 1,000): the agents in the hosts' memory (`placement()`) and the
   hosts' RSS;
3. a team served by `cantata serve` (a subprocess, in-memory store) given 10,000
   conversations over ``/v1/chat/completions`` (quick: 2,000): the server's RSS.

The team is a round robin of two participants on scripted models (instant answers, no
recorded calls: ``max_calls=0``) that stops after two turns, so what is measured is what
each finished run leaves behind. The goal is flat within noise: no live agent at the end,
and RSS between the middle and the end grown by less than a few MB (the start is read after
a warm-up of 100 conversations; allocator arenas and caches fill before the middle).

Not run by `run.py` (it takes minutes; its figures are not in the tables of docs/benchmarks.md): run
``PYTHONPATH=src .venv/bin/python benchmarks/soak.py [--quick] [--only local|ray|serve]``.
RSS is read from /proc (Linux).

Measured once each (2 cores shared with other work, so rates are low and noisy; RSS
start/middle/end after a collection), at the commit that added this file:

- ``--only local``: 100,000 sessions at 1,530/s; live agents 0/0/0; process RSS
  45.6/45.6/45.6 MB.
- ``--only ray``: 10,000 sessions at 22/s on 4 hosts (2 a node); agents in the hosts'
  memory 0/0/0; hosts' RSS 413.0/426.3/428.3 MB (2 MB from the middle to the end; before
  runs released their agents, 4 agents and about 17 MB were left per 1,000 sessions).
- ``--only serve``: 10,000 conversations at 25/s; server RSS 133.3/135.3/137.8 MB (4.5 MB
  over the 10,000, under half a kilobyte a conversation: the team's in-memory cache of
  carried state, up to 4,096 conversations, beside the store that keeps them all).
- ``SOAK_SERVE=3000 SOAK_SERVE_STORE=sqlite:////tmp/soak.db ... --only serve``, with the
  cache left to the store: 3,000 conversations at 28/s, server RSS 156.8/157.1/157.3 MB
  (0.2 MB middle to end; 0.8 MB with the cache, in the same session). With the default
  ``memory://`` store of this row the store itself is in the process and grows with every
  conversation's carried state, as an in-memory store does.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from _harness import Row  # noqa: E402
from cantata.agents import ChatAgent  # noqa: E402
from cantata.core import Message  # noqa: E402
from cantata.models import ChatOptions, ScriptedChatClient  # noqa: E402
from cantata.runtime import LocalRuntime  # noqa: E402
from cantata.teams import GroupChat, Team  # noqa: E402

WARM_UP = 100
MAX_REPEAT = 1


def _answer(messages: list[Message], options: ChatOptions) -> str:
    return f"heard {len(messages)}"


def make_team() -> Team:
    """Two participants, two turns; models that keep no record of their calls."""
    agents = [ChatAgent(ScriptedChatClient(_answer, max_calls=0), name=name) for name in ("a", "b")]
    return GroupChat(agents, max_turns=2, name="soak")


team = make_team()
"""What the served row serves (``benchmarks/soak.py:team``)."""


def _rss(pids: list[int]) -> int:
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/status") as status:
                for line in status:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1]) * 1024
                        break
        except OSError:
            continue
    return total


async def _soak(
    total: int,
    one: Callable[[int], Awaitable[None]],
    read: Callable[[], Awaitable[tuple[int, int]]],
) -> dict[str, Any]:
    """Run `one(i)` `total` times after a warm-up; `read()` (live agents, RSS bytes) at the
    start, the middle and the end, each after a collection."""
    for i in range(WARM_UP):
        await one(-i - 1)
    marks: dict[str, tuple[int, int]] = {}
    gc.collect()
    marks["start"] = await read()
    start = time.perf_counter()
    for i in range(total):
        await one(i)
        if i + 1 == total // 2:
            gc.collect()
            marks["middle"] = await read()
    gc.collect()
    marks["end"] = await read()
    wall = time.perf_counter() - start
    return {
        "total": total,
        "per_second": total / wall,
        "agents": {k: v[0] for k, v in marks.items()},
        "rss_mb": {k: round(v[1] / 2**20, 1) for k, v in marks.items()},
    }


def _rows(label: str, got: dict[str, Any], holder: str) -> list[Row]:
    rss, agents = got["rss_mb"], got["agents"]
    extra = {**got}
    counted = (
        ""
        if holder == "server"  # the server's agents are not counted from outside
        else f"agents start/middle/end {agents['start']}/{agents['middle']}/{agents['end']}, "
    )
    note = (
        f"{got['total']:,} sessions at {got['per_second']:,.0f}/s; {counted}{holder} RSS "
        f"{rss['start']}/{rss['middle']}/{rss['end']} MB"
    )
    return [
        Row(
            f"soak: {label}, live agents at the end",
            "agents",
            float(agents["end"]),
            higher_is_better=False,
            goal="<= 0 agents",
            note=note,
            extra=extra,
        ),
        Row(
            f"soak: {label}, {holder} RSS growth middle to end",
            "MB",
            round(rss["end"] - rss["middle"], 1),
            higher_is_better=False,
            goal="<= 5 MB",
            note=note,
            extra=extra,
        ),
    ]


async def local_rows(quick: bool) -> list[Row]:
    total = int(os.environ.get("SOAK_LOCAL", 10_000 if quick else 100_000))
    soak_team = make_team()
    async with LocalRuntime() as rt:

        async def one(i: int) -> None:
            session = soak_team.create_session(runtime=rt)
            await session.run(f"conversation {i}")
            await session.close()

        async def read() -> tuple[int, int]:
            return len(rt.live_agents()), _rss([os.getpid()])

        got = await _soak(total, one, read)
    return _rows(f"{total:,} team sessions on LocalRuntime", got, "process")


async def ray_rows(quick: bool) -> list[Row]:
    from bench_ray import _ensure_cluster
    from cantata.runtime.ray import RayRuntime

    total = int(os.environ.get("SOAK_RAY", 1_000 if quick else 10_000))
    _ensure_cluster()
    soak_team = make_team()
    async with RayRuntime(name=f"soak{os.getpid()}", hosts_per_node=2) as rt:

        async def one(i: int) -> None:
            session = soak_team.create_session(runtime=rt)
            await session.run(f"conversation {i}")
            await session.close()

        async def read() -> tuple[int, int]:
            hosts = await rt.placement()
            agents = sum(int(h["agents"]) for h in hosts)
            return agents, _rss([int(h["pid"]) for h in hosts])

        got = await _soak(total, one, read)
    return _rows(f"{total:,} team sessions on a two-node RayRuntime", got, "hosts'")


async def serve_rows(quick: bool) -> list[Row]:
    import httpx

    from bench_serve import _server_process

    total = int(os.environ.get("SOAK_SERVE", 2_000 if quick else 10_000))
    store = os.environ.get("SOAK_SERVE_STORE")
    extra = ("--store", store) if store else ()
    with _server_process(*extra, target="benchmarks/soak.py:team") as (url, proc):
        async with httpx.AsyncClient(timeout=60) as http:

            async def one(i: int) -> None:
                body = {
                    "model": "soak",
                    "messages": [{"role": "user", "content": f"conversation {i}"}],
                }
                reply = await http.post(f"{url}/v1/chat/completions", json=body)
                reply.raise_for_status()

            async def read() -> tuple[int, int]:
                return 0, _rss([proc.pid])

            got = await _soak(total, one, read)
    return _rows(f"a served team given {total:,} conversations", got, "server")[1:]


SECTIONS = {"local": local_rows, "ray": ray_rows, "serve": serve_rows}


async def collect(quick: bool, only: list[str] | None = None) -> list[Row]:
    rows: list[Row] = []
    for name, section in SECTIONS.items():
        if not only or name in only:
            rows += await section(quick)
    return rows


async def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--only", action="append", choices=sorted(SECTIONS))
    args = parser.parse_args(argv)
    for row in await collect(args.quick, args.only):
        print(json.dumps({"name": row.name, "ours": row.ours, "unit": row.unit, "goal": row.goal}))
        print("   ", row.note)


if __name__ == "__main__":
    import soak  # by its module name: Ray's workers import the team's functions from it

    asyncio.run(soak.main())
