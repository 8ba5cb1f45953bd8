"""Deprecated: the file tools moved to `cantata.tools.file_tools`, and the file-reading
agent to `cantata.teams` (`file_reader_agent`). Importing a name from here still works for
one release, with a `DeprecationWarning`."""

from __future__ import annotations

from ._moved import MOVED_TO_TOOLS, moved_getattr

__getattr__ = moved_getattr(
    "cantata.teams.file_tools",
    {k: v for k, v in MOVED_TO_TOOLS.items() if v.endswith("file_tools")},
    stay={"file_reader_agent": "cantata.teams.specialists"},
)
