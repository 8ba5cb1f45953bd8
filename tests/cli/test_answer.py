"""Loading the model shows a status line on a terminal only."""

from __future__ import annotations

import asyncio
import io
import logging

import pytest
from rich.console import Console

from cantata.cli.answer import close_client, load_model, quiet_loop_errors
from cantata.models import LocalChatClient, ScriptedChatClient


@pytest.mark.local_model
@pytest.mark.parametrize("terminal", [True, False])
async def test_a_status_line_while_the_model_loads_on_a_terminal_only(terminal: bool) -> None:
    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=terminal, width=80)
    client = LocalChatClient()
    try:
        await load_model(client, console)
        assert ("loading the model" in buffer.getvalue()) is terminal
    finally:
        await close_client(client)


async def test_a_client_that_needs_no_loading_shows_nothing() -> None:
    buffer = io.StringIO()
    await load_model(ScriptedChatClient([]), Console(file=buffer, force_terminal=True))
    assert buffer.getvalue() == ""


def test_loop_callback_errors_go_to_the_debug_log_unless_debugging(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def broken() -> None:
        raise RuntimeError("a protocol callback failed")

    caplog.set_level(logging.DEBUG, logger="cantata.cli")
    for debug in (False, True):
        caplog.clear()
        with asyncio.Runner() as runner:
            quiet_loop_errors(runner.get_loop(), debug=debug)
            runner.get_loop().call_soon(broken)
            runner.run(asyncio.sleep(0))
        shown = [r for r in caplog.records if r.name == "asyncio"]  # what reaches stderr
        logged = [r for r in caplog.records if r.name == "cantata.cli"]
        assert len(shown) == (1 if debug else 0)
        assert len(logged) == 1 and logged[0].levelno == logging.DEBUG
