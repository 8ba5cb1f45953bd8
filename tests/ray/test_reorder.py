"""The per-sender reorder buffer and the wire envelope, without a cluster."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cantata.core import SchemaVersionError, SerializationError, TimeoutError
from cantata.runtime.ray import WIRE_VERSION, RemoteHandlerError, ReorderBuffer, wire


async def _admit_all(buffer: ReorderBuffer, arrivals: list[int], stream: str = "s") -> list[int]:
    handled: list[int] = []

    async def one(seq: int) -> None:
        waiting = buffer.admit(stream, seq)
        if waiting is not None:
            await waiting
        handled.append(seq)

    tasks = []
    for seq in arrivals:
        tasks.append(asyncio.ensure_future(one(seq)))
        await asyncio.sleep(0)  # each arrives before the next
    await asyncio.gather(*tasks)
    return handled


@given(st.permutations(list(range(8))))
async def test_messages_are_admitted_in_the_order_sent(arrivals: list[int]) -> None:
    buffer = ReorderBuffer(wait=30.0)
    assert await _admit_all(buffer, arrivals) == list(range(8))
    assert buffer.skipped == 0


async def test_streams_are_independent() -> None:
    buffer = ReorderBuffer(wait=30.0)
    assert await _admit_all(buffer, [1, 0], "a") == [0, 1]
    assert await _admit_all(buffer, [0], "b") == [0]


async def test_a_gap_is_waited_for_only_so_long() -> None:
    buffer = ReorderBuffer(wait=0.05)
    assert await _admit_all(buffer, [0, 2, 3]) == [0, 2, 3]  # 1 never came
    assert buffer.skipped >= 1  # 2 gave up on 1 (3 may have timed out beside it)
    assert await _admit_all(buffer, [1]) == [1]  # late: admitted at once


def test_a_reply_from_another_wire_version_is_a_typed_error() -> None:
    with pytest.raises(SchemaVersionError, match="wire version 99"):
        wire.result({"v": 99, "ok": "null"}, "a request")
    with pytest.raises(SerializationError):
        wire.result(["not", "an", "envelope"], "a request")
    assert wire.result(wire.ok([1, "a"]), "x") == [1, "a"]
    assert WIRE_VERSION == 2


def test_errors_cross_as_their_own_type_or_a_named_remote_error() -> None:
    with pytest.raises(TimeoutError, match="late"):
        wire.result(wire.failed(TimeoutError("late")), "x")
    with pytest.raises(KeyError):
        wire.result(wire.failed(KeyError("k")), "x")

    class Own(Exception):
        pass

    with pytest.raises(RemoteHandlerError, match="Own: mine") as caught:
        wire.result(wire.failed(Own("mine")), "x")
    assert caught.value.remote_type.endswith("Own")
