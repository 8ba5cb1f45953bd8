"""`cantata chat`: a conversation at the terminal or from a pipe.

Ctrl-C while the model answers stops that answer and returns to the prompt (the question is
dropped with it, so the conversation stays one question, one answer); Ctrl-C or Ctrl-D at
the prompt leaves. A failed answer is one error line and the conversation goes on. Read from
a pipe, no prompts are printed: each line of input gets its answer on its own line.
"""

from __future__ import annotations

import asyncio
import os
import select
import sys
from collections.abc import Collection

from rich.console import Console

from ..core import CantataError, Message
from ..models import ChatClient, ChatOptions
from .answer import close_client, load_model, quiet_loop_errors, stream_answer
from .failure import report

__all__ = ["EXIT_WORDS", "ChatSession"]

EXIT_WORDS = frozenset({"/exit", "/quit"})


class ChatSession:
    """One conversation with `client`; `run` blocks until the user leaves."""

    def __init__(
        self,
        client: ChatClient,
        options: ChatOptions,
        *,
        system: str | None,
        out: Console,
        err: Console,
        interactive: bool,
        debug: bool = False,
        flags: Collection[str] = (),
    ) -> None:
        self._client = client
        self._flags = flags
        """The command's model options, which error lines may name."""
        self._options = options
        self._history = [Message("system", system)] if system else []
        self._out = out
        self._err = err
        self._interactive = interactive
        self._debug = debug
        self._reader = _LineReader()

    def run(self) -> None:
        """Read questions and answer them until /exit, end of input or Ctrl-C at the prompt."""
        with asyncio.Runner() as runner:
            quiet_loop_errors(runner.get_loop(), debug=self._debug)
            try:
                runner.run(load_model(self._client, self._err))
                if self._interactive:
                    self._out.print("[dim]cantata chat: /exit, Ctrl-D or Ctrl-C to leave[/]")
                while (text := self._read()) is not None:
                    if text in EXIT_WORDS:
                        break
                    if text:
                        self._turn(runner, text)
            finally:
                runner.run(close_client(self._client))

    def _read(self) -> str | None:
        """The next question, or None to leave."""
        while True:
            try:
                if self._interactive:
                    self._out.print("[bold green]you>[/] ", end="")
                raw = self._reader.readline()
                if not raw:
                    if self._interactive:
                        self._out.print()
                    return None
                return raw.decode("utf-8").strip()
            except KeyboardInterrupt:
                if self._interactive:
                    self._out.print()
                return None
            except UnicodeDecodeError as exc:
                report(exc, debug=self._debug, console=self._err, flags=self._flags)

    def _turn(self, runner: asyncio.Runner, text: str) -> None:
        self._history.append(Message("user", text))
        if self._interactive:
            self._out.print("[bold blue]model>[/] ", end="")
        answer = stream_answer(self._client, self._history, self._options, self._out)
        try:
            response = runner.run(answer)
        except KeyboardInterrupt:
            self._history.pop()
            self._out.print()
            self._err.print("[dim](answer stopped)[/]")
            return
        except CantataError as exc:
            self._history.pop()
            self._out.print()
            report(exc, debug=self._debug, console=self._err, flags=self._flags)
            return
        self._history.extend(response.messages)


class _LineReader:
    """Lines of stdin as bytes (empty at its end), read straight from its file descriptor.

    It waits in short selects rather than one blocking read: a Ctrl-C that the system hands
    to another thread (a model's worker) would not interrupt a read, but between two selects
    the main thread runs the signal handler and leaves the prompt. Its own buffer (not the
    stdin object's) keeps lines that arrive together from waiting for more input.
    """

    def __init__(self) -> None:
        self._pending = b""
        self._ended = False

    def readline(self) -> bytes:
        try:
            fd = sys.stdin.fileno()
        except (OSError, ValueError):  # not a file (a test's stdin): nothing to wait on
            return sys.stdin.buffer.readline()
        while b"\n" not in self._pending and not self._ended:
            # waiting for the user has no bound by design; each select has one
            while not select.select([fd], [], [], 0.1)[0]:
                pass
            piece = os.read(fd, 65536)
            self._ended = not piece
            self._pending += piece
        line, newline, self._pending = self._pending.partition(b"\n")
        return line + newline
