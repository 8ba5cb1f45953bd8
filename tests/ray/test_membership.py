"""Placement by rendezvous hashing (membership.py): the same host in every process, and
only the agents that go to a new host move when one is added."""

from __future__ import annotations

import pytest

from cantata.runtime.ray import AgentUnavailable
from cantata.runtime.ray.membership import Membership, node_of

HOSTS = tuple(f"pool/host/node{n}/{i}" for n in range(2) for i in range(2))
AGENTS = [f"counter/k{i}" for i in range(4000)]


def test_an_agents_host_is_the_same_wherever_it_is_computed() -> None:
    one, other = Membership(1, HOSTS), Membership.from_bytes(Membership(1, HOSTS).to_bytes())
    assert other == one
    owners = [one.owner(a) for a in AGENTS]
    assert owners == [other.owner(a) for a in AGENTS]
    counts = {h: owners.count(h) for h in HOSTS}
    assert all(700 < c < 1300 for c in counts.values()), counts  # spread evenly
    assert node_of(HOSTS[2]) == "node1"


def test_adding_a_host_moves_only_the_agents_it_takes_and_removing_it_moves_them_back() -> None:
    before = Membership(1, HOSTS)
    added = "pool/host/node2/0"
    after = Membership(2, (*HOSTS, added))
    moved = [a for a in AGENTS if before.owner(a) != after.owner(a)]
    assert all(after.owner(a) == added for a in moved)  # nobody else moves
    assert 600 < len(moved) < 1000  # about a fifth
    again = Membership(3, HOSTS)
    assert [again.owner(a) for a in AGENTS] == [before.owner(a) for a in AGENTS]


def test_a_pool_without_hosts_is_a_typed_error() -> None:
    with pytest.raises(AgentUnavailable, match="no live node"):
        Membership(4, ()).owner("counter/a")
