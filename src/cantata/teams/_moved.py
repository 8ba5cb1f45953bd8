"""Names that moved from `cantata.teams` to `cantata.tools` (the code executor and the file
tools are tools, not teams): they still resolve from their old places for one release, with
a `DeprecationWarning` that names the new import."""

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

REMOVAL = "cantata 0.3"


def moved_getattr(
    old_module: str, names: dict[str, str], *, stay: dict[str, str] | None = None
) -> Callable[[str], Any]:
    """A module ``__getattr__`` for `old_module`: a name in `names` (or in `stay`, names
    that moved to another module of `cantata.teams`) warns and resolves from its new home."""
    everything = {**names, **(stay or {})}

    def __getattr__(name: str) -> Any:
        home = everything.get(name)
        if home is None:
            raise AttributeError(f"module {old_module!r} has no attribute {name!r}")
        public = "cantata.tools" if home.startswith("cantata.tools") else "cantata.teams"
        warnings.warn(
            f"{old_module}.{name} moved: import it from {public} "
            f"(`from {public} import {name}`); the old name goes in {REMOVAL}",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module(home), name)

    return __getattr__
