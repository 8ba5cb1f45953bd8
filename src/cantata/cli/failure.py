"""How the CLI reports a failure: one line that says what to do, in the CLI's own words.

Library errors name Python parameters (``base_url=``, ``model_path=``, ``api_key=``); a CLI
user knows flags and environment variables, so those names are translated, but only into
flags the failing command has: `cantata ask` has ``--base-url``, `cantata run` does not (its
model is in the spec, whose fields keep the Python names). The traceback is shown only with
``--debug``.
"""

from __future__ import annotations

import re
import traceback
from collections.abc import Collection

from rich.console import Console

from ..core import CantataError

__all__ = ["cli_words", "describe", "foreign_flags", "report"]

# (pattern, replacement, the flag a command must have for the replacement to apply)
_CLI_WORDS: tuple[tuple[re.Pattern[str], str, str], ...] = (
    (re.compile(r",? or pass `?api_key=`?"), "", "--base-url"),
    (re.compile(r"\bpass `?api_key=`?"), "set CANTATA_API_KEY", "--base-url"),
    (re.compile(r"`?\bbase_url=?`?"), "--base-url", "--base-url"),
    (re.compile(r"`?\bmodel_path=?`?"), "--model-path", "--model-path"),
    (re.compile(r"`?\bmax_tokens=?`?"), "--max-tokens", "--max-tokens"),
    (re.compile(r"`?\btemperature=`?"), "--temperature", "--temperature"),
)
_ALLOW = re.compile(r"`?\ballow=\[([^\]]*)\]`?")
_FLAG = re.compile(r"(?<![\w-])--[a-z][a-z-]*")
_LIMIT = 600


def cli_words(text: str, flags: Collection[str] = ()) -> str:
    """`text` with Python parameter names replaced by the flags (and variables) of a
    command that has `flags`; a name whose flag the command lacks is left as it is."""
    for pattern, words, flag in _CLI_WORDS:
        if flag in flags:
            text = pattern.sub(words, text)
    if "--allow" in flags:
        text = _ALLOW.sub(_allow_flags, text)
    return text


def _allow_flags(match: re.Match[str]) -> str:
    """``allow=['a', 'b']`` as the flags that say it: ``--allow a --allow b``."""
    names = [n.strip().strip("'\"") for n in match.group(1).split(",") if n.strip()]
    return " ".join(f"--allow {n}" for n in names) or "--allow MODULE"


def foreign_flags(text: str, flags: Collection[str]) -> list[str]:
    """The flags `text` names that are not among `flags` (what a command must never say)."""
    return sorted({f for f in _FLAG.findall(text) if f not in flags})


def describe(exc: BaseException, flags: Collection[str] = ()) -> str:
    """One line about a failure: what went wrong and what to do (in the words of a command
    that has `flags`)."""
    if isinstance(exc, CantataError):
        line = f"{type(exc).__name__}: {cli_words(str(exc), flags)}"
    elif isinstance(exc, UnicodeDecodeError):
        line = (
            f"the input is not UTF-8 text (byte {exc.object[exc.start : exc.start + 1]!r} at "
            f"position {exc.start}); give the text in UTF-8"
        )
    elif isinstance(exc, OSError):
        line = f"{exc.strerror or exc}{f': {exc.filename}' if exc.filename else ''}"
    else:
        line = (
            f"unexpected {type(exc).__name__}: {exc}; run again with --debug to see where, "
            "and report it"
        )
    line = " ".join(line.split())
    return line if len(line) <= _LIMIT else line[: _LIMIT - 3] + "..."


def report(
    exc: BaseException, *, debug: bool, console: Console, flags: Collection[str] = ()
) -> None:
    """Print `exc` as one red line on `console` (after its traceback with `debug`), naming
    only options among `flags` (the failing command's)."""
    if debug:
        console.print(
            "".join(traceback.format_exception(exc)), end="", markup=False, highlight=False
        )
    console.print("[bold red]error:[/] ", end="", markup=True)
    console.print(describe(exc, flags), markup=False, highlight=False)
