"""`new_id` draws its randomness in batches (one `os.urandom` call per 256 ids, a pool per
thread, dropped in a forked child): ids stay unique across threads and across a fork."""

from __future__ import annotations

import os
import re
import select
import threading

import pytest

from cantata.core import new_id


def test_ids_are_hex_and_unique_across_threads() -> None:
    ids = [new_id() for _ in range(1000)]
    assert len(set(ids)) == 1000
    assert all(re.fullmatch(r"[0-9a-f]{32}", i) for i in ids)
    out: list[list[str]] = [[] for _ in range(4)]

    def work(slot: list[str]) -> None:
        slot.extend(new_id() for _ in range(1000))

    threads = [threading.Thread(target=work, args=(slot,)) for slot in out]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)
        assert not t.is_alive()
    drawn = [i for slot in out for i in slot]
    assert len(drawn) == 4000
    assert len(set(drawn) | set(ids)) == 5000


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_does_not_reuse_the_parents_ids() -> None:
    new_id()  # the parent's pool holds ids not yet handed out
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its first id, then out at once
        try:
            os.write(w, new_id().encode())
        finally:
            os._exit(0)
    os.close(w)
    try:
        ready, _, _ = select.select([r], [], [], 10)
        assert ready, "the forked child wrote no id within 10 s"
        child = os.read(r, 64).decode()
    finally:
        os.close(r)
        os.waitpid(pid, 0)
    assert re.fullmatch(r"[0-9a-f]{32}", child)
    assert child != new_id()
