"""Tools that read files under one root directory (the file-reading agent made of them is
`cantata.teams.file_reader_agent`).

Every path a model sends is resolved (``..`` and symbolic links included) before it is
opened, and refused unless the result lies under the root: a model can name any string,
so the check is on the resolved path, never on the text. With ``list_in_schema=True`` the
tool schema names the files that exist when the tools are made (an ``enum``), so a model
whose output is grammar-constrained (the local model) can only ever pick a real file.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..core import ConfigurationError, ToolError
from .tool import FunctionTool

__all__ = ["FileAccessError", "FileTools"]

_MAX_LISTED = 200


class FileAccessError(ToolError):
    """A path was refused (outside the root, missing, not a file) or could not be read."""

    def __init__(self, message: str, *, path: str, root: str) -> None:
        super().__init__(message)
        self.path = path
        self.root = root


class FileTools:
    """``list_files`` and ``read_file`` confined to `root`.

    `max_bytes` bounds what one read returns (the rest is cut, and the answer says so).
    `list_in_schema` puts the relative paths of the files present now (up to 200) in the
    ``read_file`` schema as an enum.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        max_bytes: int = 16_000,
        list_in_schema: bool = False,
    ) -> None:
        resolved = Path(root).resolve()
        if not resolved.is_dir():
            raise ConfigurationError(
                f"FileTools root {str(resolved)!r} is not a directory; pass the folder the "
                "agent may read"
            )
        if not isinstance(max_bytes, int) or max_bytes < 1:
            raise ConfigurationError(
                f"FileTools max_bytes must be a positive int, got {max_bytes!r}"
            )
        self.root = resolved
        self.max_bytes = max_bytes
        self._list_in_schema = list_in_schema

    # -- the checks ------------------------------------------------------------------

    def resolve(self, path: str) -> Path:
        """The file `path` (relative to the root, or absolute) names, if it lies under the
        root; raises `FileAccessError` otherwise."""
        if not isinstance(path, str) or not path or "\x00" in path:
            raise FileAccessError(
                f"path {path!r} is not a usable file name; give a path relative to "
                f"{str(self.root)!r}",
                path=str(path),
                root=str(self.root),
            )
        candidate = Path(path)
        full = (candidate if candidate.is_absolute() else self.root / candidate).resolve()
        if full != self.root and self.root not in full.parents:
            raise FileAccessError(
                f"path {path!r} resolves to {str(full)!r}, outside the readable root "
                f"{str(self.root)!r}; only files under the root can be read",
                path=path,
                root=str(self.root),
            )
        return full

    # -- the operations --------------------------------------------------------------

    def list_files(self, directory: str = ".") -> list[str]:
        """Relative paths of the files under `directory` (itself under the root), sorted."""
        base = self.resolve(directory)
        if not base.is_dir():
            raise FileAccessError(
                f"{directory!r} is not a directory under {str(self.root)!r}",
                path=directory,
                root=str(self.root),
            )
        found: list[str] = []
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames.sort()
            for name in sorted(filenames):
                full = Path(dirpath, name)
                if full.resolve().is_relative_to(self.root):  # skip links leading out
                    found.append(full.relative_to(self.root).as_posix())
                if len(found) >= _MAX_LISTED:
                    return found
        return found

    def read_file(self, path: str) -> str:
        """The text of the file at `path` (UTF-8, undecodable bytes replaced)."""
        full = self.resolve(path)
        if not full.is_file():
            raise FileAccessError(
                f"no file {path!r} under {str(self.root)!r}; call list_files to see what exists",
                path=path,
                root=str(self.root),
            )
        try:
            with full.open("rb") as f:
                data = f.read(self.max_bytes + 1)
        except OSError as exc:
            raise FileAccessError(
                f"could not read {path!r}: {exc.strerror or exc}", path=path, root=str(self.root)
            ) from exc
        text = data[: self.max_bytes].decode("utf-8", errors="replace")
        if len(data) > self.max_bytes:
            text += f"\n[cut: the file is longer than {self.max_bytes} bytes]"
        return text

    # -- as tools --------------------------------------------------------------------

    def tools(self) -> list[FunctionTool]:
        """``list_files`` and ``read_file`` as tools a model may call."""
        path_schema: dict[str, Any] = {"type": "string", "description": "relative file path"}
        if self._list_in_schema:
            listed = self.list_files()
            if listed:
                path_schema["enum"] = listed
        return [
            FunctionTool(
                "list_files",
                "List the files that can be read, as paths relative to the root.",
                func=self.list_files,
                parameters={
                    "type": "object",
                    "properties": {"directory": {"type": "string"}},
                    "required": [],
                },
            ),
            FunctionTool(
                "read_file",
                "Read a text file and return its contents.",
                func=self.read_file,
                parameters={
                    "type": "object",
                    "properties": {"path": path_schema},
                    "required": ["path"],
                },
            ),
        ]
