"""An agent says which loop limit its runs have, so a config of it can be written back."""

from __future__ import annotations

from cantata import ChatAgent, ScriptedChatClient
from cantata.tools import FunctionInvokingChatClient


def test_max_iterations_is_readable() -> None:
    assert ChatAgent(ScriptedChatClient(["ok"]), max_iterations=3).max_iterations == 3
    assert ChatAgent(ScriptedChatClient(["ok"])).max_iterations == 10


def test_a_loop_given_as_client_keeps_its_own_limit() -> None:
    loop = FunctionInvokingChatClient(ScriptedChatClient(["ok"]), max_iterations=4)
    assert loop.max_iterations == 4
    assert ChatAgent(loop, max_iterations=7).max_iterations == 4
