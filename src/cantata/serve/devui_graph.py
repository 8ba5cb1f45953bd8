"""A workflow's graph laid out for the dev UI: nodes in layers, edges, drawn as SVG by the page.

The page works offline, so nothing renders Mermaid for it: this module reads the same
edges `to_mermaid()` draws and gives each node a layer (its distance from the start
executor along the longest acyclic path) and a place in that layer; the page's script
turns that into boxes and arrows.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..workflows import Workflow

__all__ = ["graph_of"]


def graph_of(workflow: Workflow) -> dict[str, Any]:
    """Nodes (id, layer, index, start), edges (source, target, label), and the Mermaid text."""
    from ..workflows.viz import _edges

    edges = _edges(workflow)
    layers = _layers(list(workflow.executors), workflow.start_id, edges)
    counts: dict[int, int] = {}
    nodes = []
    for eid in workflow.executors:
        layer = layers[eid]
        index = counts.get(layer, 0)
        counts[layer] = index + 1
        nodes.append({"id": eid, "layer": layer, "index": index, "start": eid == workflow.start_id})
    return {
        "nodes": nodes,
        "edges": [{"source": s, "target": t, "label": label} for s, t, label in edges],
        "width": max(counts.values(), default=0),
        "depth": max(counts, default=-1) + 1,
        "mermaid": workflow.to_mermaid(),
    }


def _layers(ids: list[str], start: str, edges: list[tuple[str, str, str]]) -> dict[str, int]:
    """Longest distance from `start` over the edges that do not close a cycle (back edges
    are found by a depth-first walk and ignored); unreachable nodes go after the rest."""
    out: dict[str, list[str]] = {i: [] for i in ids}
    for s, t, _ in edges:
        if s in out and t in out and t not in out[s]:
            out[s].append(t)
    back = _back_edges(ids, start, out)
    forward = {s: [t for t in ts if (s, t) not in back] for s, ts in out.items()}
    indegree = {i: 0 for i in ids}
    for ts in forward.values():
        for t in ts:
            indegree[t] += 1
    layer = {i: 0 for i in ids}
    queue = deque(i for i in ids if indegree[i] == 0)
    while queue:  # Kahn's order: each node's layer is final when it is taken
        node = queue.popleft()
        for t in forward[node]:
            layer[t] = max(layer[t], layer[node] + 1)
            indegree[t] -= 1
            if indegree[t] == 0:
                queue.append(t)
    if layer.get(start, 0) != 0:  # the start is drawn on top even when something feeds it
        layer[start] = 0
    return layer


def _back_edges(ids: list[str], start: str, out: dict[str, list[str]]) -> set[tuple[str, str]]:
    back: set[tuple[str, str]] = set()
    state: dict[str, int] = {}  # 1: on the walk's path, 2: done
    for root in [start, *ids]:
        if root in state:
            continue
        stack: list[tuple[str, int]] = [(root, 0)]
        state[root] = 1
        while stack:
            node, i = stack.pop()
            if i < len(out[node]):
                stack.append((node, i + 1))
                nxt = out[node][i]
                if state.get(nxt) == 1:
                    back.add((node, nxt))
                elif nxt not in state:
                    state[nxt] = 1
                    stack.append((nxt, 0))
            else:
                state[node] = 2
    return back
