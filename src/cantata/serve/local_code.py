"""Which served entries run model-written code on this machine, so that `cantata serve`
can refuse to offer them unless the user says they accept the risk.

An entry runs local code when an agent in it (the agent itself, a team's participants, a
workflow's agent executors, an agent used as a tool, at any depth of nesting) is a
`CodeRunnerAgent` or has a tool made by `python_tool`, over an executor that does not say
it runs code apart (``isolated``: a `ContainerCodeExecutor` runs each snippet in a
container; `LocalCodeExecutor`'s kernel sandbox is on this machine, so it needs the flag).
A tool of your own that runs code some other way is not recognised. Anyone who can send
such an entry a prompt can have the model write code that runs here, and loopback is no
exception: a proxy, a tunnel or another user of the machine reaches it too.
"""

from __future__ import annotations

from typing import Any

from ..core import ConfigurationError
from .served import ServedSet

__all__ = ["ALLOW_FLAG", "check_local_code", "local_code_entries"]

ALLOW_FLAG = "--allow-remote-code-execution"
"""The `cantata serve` flag that accepts serving local code on a network address."""


def _runs_code(obj: Any, seen: set[int]) -> bool:
    from ..agents import Agent
    from ..teams import CodeRunnerAgent, Team, TeamAgent
    from ..workflows import Workflow, WorkflowAgent

    if id(obj) in seen:
        return False
    seen.add(id(obj))
    if isinstance(obj, CodeRunnerAgent):
        return not getattr(obj.executor, "isolated", False)
    if isinstance(obj, TeamAgent):
        return _runs_code(obj.team, seen)
    if isinstance(obj, WorkflowAgent):
        return _runs_code(obj.workflow, seen)
    if isinstance(obj, Team):
        return any(_runs_code(a, seen) for a in obj.participants)
    if isinstance(obj, Workflow):
        return any(_runs_code(getattr(e, "agent", None), seen) for e in obj.executors.values())
    tools = getattr(obj, "tools", None)
    if isinstance(tools, tuple | list):
        for t in tools:
            func = getattr(t, "func", None)
            if getattr(func, "runs_local_code", False):
                return True
            # an agent used as a tool: its function holds the agent in its closure
            for cell in getattr(func, "__closure__", None) or ():
                try:
                    held = cell.cell_contents
                except ValueError:  # an empty cell
                    continue
                if isinstance(held, Agent | Team | Workflow) and _runs_code(held, seen):
                    return True
    return False


def local_code_entries(served: ServedSet) -> list[str]:
    """The names of the served entries that run model-written code on this machine."""
    return [name for name, entry in served.items() if _runs_code(entry.target, set())]


def check_local_code(served: ServedSet, *, allow: bool) -> None:
    """Refuse to serve entries that run model-written code outside the kernel's confinement,
    on any address, unless `allow`."""
    if allow:
        return
    names = local_code_entries(served)
    if names:
        raise ConfigurationError(
            f"{', '.join(repr(n) for n in names)} run model-written Python on this machine "
            "(a coder agent or a code runner): anyone who can send a prompt (through a "
            "proxy, a tunnel, or another user of this machine, on loopback too) could have "
            f"code run here. Pass {ALLOW_FLAG} if you accept that risk, or give the agent an "
            "executor that runs it elsewhere (ContainerCodeExecutor)"
        )
