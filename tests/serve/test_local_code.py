"""`cantata serve` refuses an app whose agents run model-written code outside a sandbox
unless the user passes the flag that names the risk, on any address, loopback included; an
executor that says the kernel confines it (``isolated``) needs no flag."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest

from cantata.agents import ChatAgent
from cantata.core import ConfigurationError
from cantata.models import ScriptedChatClient
from cantata.serve import ServedSet
from cantata.serve.local_code import ALLOW_FLAG, check_local_code, local_code_entries
from cantata.teams import CodeRunnerAgent, GroupChat, coder_agent
from cantata.tools import CodeResult, LocalCodeExecutor, python_tool
from cantata.workflows import AgentExecutor, WorkflowBuilder

from ._servers import ROOT


def _plain(name: str) -> ChatAgent:
    return ChatAgent(ScriptedChatClient(["hi"]), name=name)


@pytest.fixture
def executor() -> Iterator[LocalCodeExecutor]:
    ex = LocalCodeExecutor(timeout=5)
    yield ex
    ex.close()


def test_entries_that_run_code_are_found_at_any_depth(executor: LocalCodeExecutor) -> None:
    coder = coder_agent(ScriptedChatClient(["x"]), executor)
    runner = CodeRunnerAgent(executor)
    team = GroupChat([_plain("a"), coder], name="team", max_turns=1)
    outer = GroupChat([_plain("b"), team.as_agent(name="inner")], name="outer", max_turns=1)
    flow = WorkflowBuilder(AgentExecutor(runner, id="run"), name="flow").build()
    as_tool = ChatAgent(ScriptedChatClient(["x"]), name="boss", tools=[coder.as_tool()])
    served = ServedSet(
        {
            "plain": _plain("p"),
            "coder": coder,
            "runner": runner,
            "team": team,
            "outer": outer,
            "flow": flow,
            "boss": as_tool,
        }
    )
    assert local_code_entries(served) == ["coder", "runner", "team", "outer", "flow", "boss"]


def test_local_code_is_refused_without_the_flag(executor: LocalCodeExecutor) -> None:
    served = ServedSet({"coder": coder_agent(ScriptedChatClient(["x"]), executor)})
    with pytest.raises(ConfigurationError, match=ALLOW_FLAG):
        check_local_code(served, allow=False)
    check_local_code(served, allow=True)
    check_local_code(ServedSet(_plain("p")), allow=False)


def test_serve_refuses_local_code_on_loopback_too(executor: LocalCodeExecutor) -> None:
    from cantata.serve import serve

    coder = coder_agent(ScriptedChatClient(["x"]), executor)
    with pytest.raises(ConfigurationError, match=ALLOW_FLAG):
        serve(coder, host="127.0.0.1", port=0, store="memory://")


def test_cantata_serve_on_loopback_refuses_before_it_binds() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "cantata.cli", "serve", "tests/serve/_coder.py:coder",
         "--host", "127.0.0.1", "--port", "0"],
        cwd=ROOT, capture_output=True, timeout=120, check=False,
    )  # fmt: skip
    err = done.stderr.decode()
    assert done.returncode == 1, err
    assert ALLOW_FLAG in err and "'coder'" in err and "Traceback" not in err


def test_cantata_serve_refuses_before_it_binds() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "cantata.cli", "serve", "tests/serve/_coder.py:coder",
         "--host", "0.0.0.0", "--token", "t"],
        cwd=ROOT, capture_output=True, timeout=120, check=False,
    )  # fmt: skip
    err = done.stderr.decode()
    assert done.returncode == 1, err
    assert ALLOW_FLAG in err and "'coder'" in err and "Traceback" not in err


class _Elsewhere:
    """A `CodeRunner` that says the kernel confines what it runs (as
    `ContainerCodeExecutor` does)."""

    isolated = True

    async def run(self, code: str, *, time_limit: float | None = None) -> CodeResult:
        return CodeResult(exit_code=0, stdout=code, stderr="")


class _Unknown:
    """A `CodeRunner` that says nothing about where its code runs: counted as local."""

    async def run(self, code: str, *, time_limit: float | None = None) -> CodeResult:
        return CodeResult(exit_code=0, stdout=code, stderr="")


def test_only_an_isolated_runner_is_not_local_code(executor: LocalCodeExecutor) -> None:
    elsewhere = ChatAgent(
        ScriptedChatClient(["x"]), name="boxed", tools=[python_tool(_Elsewhere())]
    )
    local = ChatAgent(ScriptedChatClient(["x"]), name="local", tools=[python_tool(executor)])
    unknown = ChatAgent(ScriptedChatClient(["x"]), name="unknown", tools=[python_tool(_Unknown())])
    boxed_runner = CodeRunnerAgent(_Elsewhere(), name="boxed_runner")  # type: ignore[arg-type]
    served = ServedSet(
        {"boxed": elsewhere, "local": local, "unknown": unknown, "boxed_runner": boxed_runner}
    )
    assert local_code_entries(served) == ["local", "unknown"]


def test_the_container_executor_declares_itself_isolated() -> None:
    from cantata.tools import ContainerCodeExecutor

    assert ContainerCodeExecutor.isolated is True
    assert LocalCodeExecutor.isolated is False
