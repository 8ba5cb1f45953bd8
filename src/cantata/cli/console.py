"""What every subcommand shares: its consoles, how its body runs (a failure is one line and
an exit code), and stdin. A leaf module: the subcommands import it, it imports none of them,
so `app`, `run` and `serve` do not import each other."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Collection

import typer
from rich.console import Console

from .failure import report

__all__ = ["err", "out", "read_stdin", "run_body"]


def out() -> Console:
    """The console for answers (stdout)."""
    return Console(highlight=False, soft_wrap=True)


def err() -> Console:
    """The console for failures and notes (stderr)."""
    return Console(stderr=True, highlight=False, soft_wrap=True)


def run_body(
    work: Callable[[], None],
    *,
    debug: bool,
    verbose: bool = False,
    flags: Collection[str] = (),
) -> None:
    """Run a command body: any failure becomes one red line and exit code 1 (130 for
    Ctrl-C); `debug` adds the traceback, `verbose` turns on DEBUG logging. Its error lines
    name only options among `flags` (the command's own, see `failure`)."""
    if verbose:
        _log_debug()
    try:
        work()
    except KeyboardInterrupt:
        err().print()
        raise typer.Exit(130) from None
    except (typer.Exit, typer.Abort):
        raise
    except Exception as exc:
        report(exc, debug=debug, console=err(), flags=flags)
        raise typer.Exit(1) from None


def _log_debug() -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.getLogger().addHandler(handler)
    logging.getLogger().setLevel(logging.WARNING)  # other libraries stay quiet
    logging.getLogger("cantata").setLevel(logging.DEBUG)


def read_stdin() -> str:
    """All of stdin as text (bytes decoded here: a non-UTF-8 pipe is one clear error)."""
    return sys.stdin.buffer.read().decode("utf-8")
