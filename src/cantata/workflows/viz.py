"""Drawings of a workflow's graph: Mermaid (renders in Markdown) and Graphviz DOT."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .graph import WorkflowGraph

__all__ = ["to_dot", "to_mermaid"]

_NODE = re.compile(r"[^A-Za-z0-9_]")


def _node(executor_id: str) -> str:
    return "n_" + _NODE.sub("_", executor_id)


def _edges(workflow: WorkflowGraph) -> list[tuple[str, str, str]]:
    """(source, target, label) of every edge; fan-ins and switches are labelled."""
    out: list[tuple[str, str, str]] = []
    for group in workflow.edge_groups:
        if group.kind == "fan_in":
            out.extend((s, group.targets[0], "fan-in") for s in group.sources)
        elif group.kind == "switch":
            last = len(group.targets) - 1
            for i, t in enumerate(group.targets):
                out.append((group.sources[0], t, "default" if i == last else f"case {i}"))
        elif group.kind == "fan_out":
            label = "select" if group.selection is not None else ""
            out.extend((group.sources[0], t, label) for t in group.targets)
        else:
            out.append((group.sources[0], group.targets[0], "if" if group.condition else ""))
    return out


def to_mermaid(workflow: WorkflowGraph) -> str:
    """A Mermaid flowchart; the start executor is drawn as a stadium."""
    lines = ["flowchart TD"]
    for eid in workflow.executors:
        label = eid.replace('"', "'")
        shape = f'(["{label}"])' if eid == workflow.start_id else f'["{label}"]'
        lines.append(f"  {_node(eid)}{shape}")
    for source, target, label in _edges(workflow):
        arrow = f" -->|{label}| " if label else " --> "
        lines.append(f"  {_node(source)}{arrow}{_node(target)}")
    return "\n".join(lines) + "\n"


def to_dot(workflow: WorkflowGraph) -> str:
    """A Graphviz digraph; the start executor is drawn doubled."""
    name = workflow.name.replace('"', "'")
    lines = [f'digraph "{name}" {{', "  rankdir=TB;"]
    for eid in workflow.executors:
        shape = "doublecircle" if eid == workflow.start_id else "box"
        label = eid.replace('"', "'")
        lines.append(f'  {_node(eid)} [label="{label}", shape={shape}];')
    for source, target, label in _edges(workflow):
        attr = f' [label="{label}"]' if label else ""
        lines.append(f"  {_node(source)} -> {_node(target)}{attr};")
    lines.append("}")
    return "\n".join(lines) + "\n"
