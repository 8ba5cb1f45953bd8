"""Names `cantata.teams` no longer exports: the code executor and the file tools moved to
`cantata.tools` (they are tools, not teams), and the executors' own protocol stays in its
modules. They still resolve from their old places for one release, with a
`DeprecationWarning` that names the new import."""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable
from typing import Any

MOVED_TO_TOOLS: dict[str, str] = {
    "CodeExecutionError": "cantata.tools.code_executor",
    "CodeResult": "cantata.tools.code_executor",
    "LocalCodeExecutor": "cantata.tools.code_executor",
    "MAX_CODE_CHARS": "cantata.tools.code_executor",
    "extract_code": "cantata.tools.code_executor",
    "python_tool": "cantata.tools.code_executor",
    "FileAccessError": "cantata.tools.file_tools",
    "FileTools": "cantata.tools.file_tools",
}
"""Each moved name and the module that defines it now."""

BEHIND: dict[str, str] = {
    "AwaitingTask": "cantata.teams.turns",
    "SpeakTurn": "cantata.teams.turns",
    "TeamTask": "cantata.teams.turns",
    "TurnDone": "cantata.teams.turns",
    "MANAGER_ID": "cantata.teams.manager",
    "ManagerState": "cantata.teams.manager",
    "ConcurrentManager": "cantata.teams.concurrent",
    "GroupChatManager": "cantata.teams.group_chat",
    "HandoffManager": "cantata.teams.handoff",
    "MagenticManager": "cantata.teams.magentic",
    "SequentialManager": "cantata.teams.sequential",
    "ParticipantExecutor": "cantata.teams.participant",
}
"""The executors' protocol and the built-in executors, no longer exported by
`cantata.teams`: each name and the module that defines it (a team of one's own imports
them from there)."""

REMOVAL = "cantata 0.3"


def moved_getattr(
    old_module: str,
    names: dict[str, str],
    *,
    stay: dict[str, str] | None = None,
    behind: dict[str, str] | None = None,
) -> Callable[[str], Any]:
    """A module ``__getattr__`` for `old_module`: a name in `names` (or in `stay`, names
    that moved to another module of `cantata.teams`, or in `behind`, names now imported
    from their own module) warns and resolves from its new home."""
    everything = {**names, **(stay or {}), **(behind or {})}
    modules = set(behind or {})

    def __getattr__(name: str) -> Any:
        home = everything.get(name)
        if home is None:
            raise AttributeError(f"module {old_module!r} has no attribute {name!r}")
        if name in modules:
            public = home
        else:
            public = "cantata.tools" if home.startswith("cantata.tools") else "cantata.teams"
        warnings.warn(
            f"{old_module}.{name} moved: import it from {public} "
            f"(`from {public} import {name}`); the old name goes in {REMOVAL}",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module(home), name)

    return __getattr__
