"""Deprecated: the code executor moved to `cantata.tools.code_executor`, and the agents
that run code to `cantata.teams` (`coder_agent`, `CodeRunnerAgent`). Importing a name from
here still works for one release, with a `DeprecationWarning`."""

from __future__ import annotations

from ._moved import MOVED_TO_TOOLS, moved_getattr

__getattr__ = moved_getattr(
    "cantata.teams.code_executor",
    {k: v for k, v in MOVED_TO_TOOLS.items() if v.endswith("code_executor")},
    stay={
        "coder_agent": "cantata.teams.specialists",
        "CodeRunnerAgent": "cantata.teams.specialists",
    },
)
