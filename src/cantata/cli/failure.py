"""How the CLI reports a failure: one line that says what to do, in the CLI's own words.

Library errors name Python parameters (``base_url=``, ``model_path=``, ``api_key=``); a CLI
user knows flags and environment variables, so those names are translated. The traceback is
shown only with ``--debug``.
"""

from __future__ import annotations

import re
import traceback

from rich.console import Console

from ..core import CantataError

__all__ = ["cli_words", "describe", "report"]

_CLI_WORDS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r",? or pass `?api_key=`?"), ""),
    (re.compile(r"\bpass `?api_key=`?"), "set CANTATA_API_KEY"),
    (re.compile(r"`?\bbase_url=?`?"), "--base-url"),
    (re.compile(r"`?\bmodel_path=?`?"), "--model-path"),
    (re.compile(r"`?\bmax_tokens=?`?"), "--max-tokens"),
    (re.compile(r"`?\btemperature=`?"), "--temperature"),
)
_LIMIT = 600


def cli_words(text: str) -> str:
    """`text` with Python parameter names replaced by the CLI's flags and variables."""
    for pattern, words in _CLI_WORDS:
        text = pattern.sub(words, text)
    return text


def describe(exc: BaseException) -> str:
    """One line about a failure: what went wrong and what to do."""
    if isinstance(exc, CantataError):
        line = f"{type(exc).__name__}: {cli_words(str(exc))}"
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


def report(exc: BaseException, *, debug: bool, console: Console) -> None:
    """Print `exc` as one red line on `console` (after its traceback with `debug`)."""
    if debug:
        console.print(
            "".join(traceback.format_exception(exc)), end="", markup=False, highlight=False
        )
    console.print("[bold red]error:[/] ", end="", markup=True)
    console.print(describe(exc), markup=False, highlight=False)
