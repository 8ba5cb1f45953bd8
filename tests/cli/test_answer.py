"""Loading the model shows a status line on a terminal only."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from cantata.cli.answer import close_client, load_model
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
