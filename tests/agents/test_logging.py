"""Agent runs log at DEBUG on the `cantata.agents` logger: start, end, failure."""

from __future__ import annotations

import logging

import pytest

from cantata.agents import ChatAgent
from cantata.core import ModelError
from cantata.models import ScriptedChatClient


async def test_a_run_logs_its_start_and_end(caplog: pytest.LogCaptureFixture) -> None:
    agent = ChatAgent(ScriptedChatClient(["hi", "again"]), name="greeter")
    with caplog.at_level(logging.DEBUG, logger="cantata.agents"):
        await agent.run("hello")
        async for _ in agent.run_stream("hello"):
            pass
    lines = [r.getMessage() for r in caplog.records if r.name == "cantata.agents"]
    starts = [line for line in lines if "greeter: run on thread" in line]
    assert len(starts) == 2 and "streaming=False" in starts[0] and "streaming=True" in starts[1]
    assert sum("greeter: run done, finish reason stop, 1 message(s)" in line for line in lines) == 2
    assert all(r.levelno == logging.DEBUG for r in caplog.records if r.name == "cantata.agents")


async def test_a_failed_run_logs_why(caplog: pytest.LogCaptureFixture) -> None:
    agent = ChatAgent(ScriptedChatClient([ModelError("down"), ModelError("down")]), name="g")
    with caplog.at_level(logging.DEBUG, logger="cantata.agents"):
        with pytest.raises(ModelError):
            await agent.run("hello")
        with pytest.raises(ModelError):
            async for _ in agent.run_stream("hello"):
                pass
    failed = [r.getMessage() for r in caplog.records if "run ended by" in r.getMessage()]
    assert failed == ["agent g: run ended by ModelError: down"] * 2
