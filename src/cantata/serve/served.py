"""The served set: what one server offers, by name (agents, workflows, teams).

Every route serves an entry through its agent view (`Served.agent`: the agent itself,
`workflow.as_agent()`, `team.as_agent()`), so a route written for agents serves workflows and
teams too; routes that need the object itself (a workflow's graph, a team's routing) read
`Served.target` and `Served.kind`.

Given a checkpoint store (the app gives one over its own store), the views of workflows and
teams checkpoint there, so a run that waits for a person is answered by whichever server
process gets the answer, after a restart too (see `TeamAgent`, `WorkflowAgent`).
"""

from __future__ import annotations

import importlib
import importlib.util
import re
import sys
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeAlias

from ..agents import Agent
from ..core import ConfigurationError, short_repr
from ..workflows import CheckpointStore

__all__ = ["Served", "ServedKind", "ServedSet", "load_target"]

ServedKind: TypeAlias = Literal["agent", "workflow", "team"]
_NAME = re.compile(r"[A-Za-z0-9_.:-]{1,128}")


@dataclass(frozen=True, slots=True)
class Served:
    """One served object: its public `name`, its `kind`, the object, and its agent view."""

    name: str
    kind: ServedKind
    target: Any
    agent: Agent

    @property
    def description(self) -> str:
        """What it is for (the agent view's description)."""
        return self.agent.description


def _entry(name: str | None, obj: Any, checkpoints: CheckpointStore | None = None) -> Served:
    from ..teams import Team, TeamAgent
    from ..workflows import Workflow, WorkflowAgent

    if isinstance(obj, Agent):
        return Served(name or obj.name, "agent", obj, obj)
    if isinstance(obj, Workflow):
        agent: Agent = WorkflowAgent(
            obj, name=_agent_name(name or obj.name), checkpoint_store=checkpoints
        )
        return Served(name or obj.name, "workflow", obj, agent)
    if isinstance(obj, Team):
        view = TeamAgent(obj, name=_agent_name(name or obj.name), checkpoint_store=checkpoints)
        return Served(name or obj.name, "team", obj, view)
    raise ConfigurationError(
        f"cannot serve {short_repr(obj)} ({type(obj).__name__})"
        f"{f' under the name {name!r}' if name else ''}: serve an Agent, a Workflow or a Team, "
        "or a dict or list of them"
    )


def _agent_name(name: str) -> str:
    safe = "".join(c if c.isalnum() or c in "_-" else "_" for c in name)[:64]
    return safe or "served"


class ServedSet(Mapping[str, Served]):
    """Name -> `Served`, built from an agent, workflow or team, or a dict or list of them.

    A list names each entry by the object's own name; a dict by its keys. Names are what
    clients put in ``model`` (OpenAI), in the A2A card's URL, and in the MCP tool name.
    With `checkpoint_store`, the views of workflows and teams checkpoint there (a waiting
    run survives the process).
    """

    def __init__(self, objects: Any, *, checkpoint_store: CheckpointStore | None = None) -> None:
        if isinstance(objects, ServedSet):
            self._entries: dict[str, Served] = dict(objects._entries)
            if checkpoint_store is not None:
                self._entries = {
                    n: e if e.kind == "agent" else _entry(n, e.target, checkpoint_store)
                    for n, e in self._entries.items()
                }
            return
        pairs: Iterable[tuple[str | None, Any]]
        if isinstance(objects, Mapping):
            pairs = list(objects.items())
        elif isinstance(objects, list | tuple):
            pairs = [(None, o) for o in objects]
        else:
            pairs = [(None, objects)]
        self._entries = {}
        for name, obj in pairs:
            if name is not None and (type(name) is not str or not _NAME.fullmatch(name)):
                raise ConfigurationError(
                    f"served name {short_repr(name)} is not valid: use 1 to 128 letters, "
                    "digits, '_', '-', '.' or ':'"
                )
            entry = _entry(name, obj, checkpoint_store)
            if entry.name in self._entries:
                raise ConfigurationError(
                    f"two served objects are named {entry.name!r}; serve a dict to give "
                    "them distinct names"
                )
            self._entries[entry.name] = entry
        if not self._entries:
            raise ConfigurationError("nothing to serve: pass at least one agent, workflow or team")

    def __getitem__(self, name: str) -> Served:
        return self._entries[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"ServedSet({', '.join(f'{n}: {e.kind}' for n, e in self._entries.items())})"


def load_target(spec: str) -> Any:
    """The object named by ``module:object`` or ``path/to/file.py:object`` (dotted
    attributes allowed after the colon)."""
    where, sep, attr = spec.rpartition(":")
    if not sep or not where or not attr:
        raise ConfigurationError(
            f"cannot read {spec!r}: name what to serve as module:object or path/file.py:object"
        )
    if where.endswith(".py") or "/" in where or "\\" in where:
        module = _load_file(Path(where), spec)
    else:
        try:
            module = importlib.import_module(where)
        except ModuleNotFoundError as exc:
            raise ConfigurationError(
                f"cannot import module {where!r} named in {spec!r} ({exc}); check the name "
                "and that it is on the Python path (or give a file path ending in .py)"
            ) from exc
    obj: Any = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise ConfigurationError(
                f"{where!r} has no attribute {attr!r} (named in {spec!r}); check the name"
            ) from None
    return obj


def _load_file(path: Path, spec: str) -> Any:
    if not path.is_file():
        raise ConfigurationError(f"no file {str(path)!r} (named in {spec!r})")
    name = f"_cantata_served_{abs(hash(str(path.resolve())))}"
    loader = importlib.util.spec_from_file_location(name, path)
    if loader is None or loader.loader is None:
        raise ConfigurationError(f"cannot load {str(path)!r} as a Python module")
    module = importlib.util.module_from_spec(loader)
    sys.modules[name] = module
    loader.loader.exec_module(module)
    return module
