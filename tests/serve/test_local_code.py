"""`cantata serve` on a network address refuses an app whose agents run model-written code
unless the user passes the flag that names the risk; on loopback it serves them."""

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


def test_a_network_address_is_refused_without_the_flag(executor: LocalCodeExecutor) -> None:
    served = ServedSet({"coder": coder_agent(ScriptedChatClient(["x"]), executor)})
    with pytest.raises(ConfigurationError, match=ALLOW_FLAG):
        check_local_code("0.0.0.0", served, allow=False)
    check_local_code("0.0.0.0", served, allow=True)
    check_local_code("127.0.0.1", served, allow=False)
    check_local_code("::1", served, allow=False)
    check_local_code("0.0.0.0", ServedSet(_plain("p")), allow=False)


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
    """A `CodeRunner` that is not a `LocalCodeExecutor` (as `ContainerCodeExecutor` is not):
    the code it is given does not run in this machine's user account."""

    async def run(self, code: str, *, time_limit: float | None = None) -> CodeResult:
        return CodeResult(exit_code=0, stdout=code, stderr="")


def test_code_run_by_another_runner_is_not_local_code(executor: LocalCodeExecutor) -> None:
    elsewhere = ChatAgent(
        ScriptedChatClient(["x"]), name="boxed", tools=[python_tool(_Elsewhere())]
    )
    local = ChatAgent(ScriptedChatClient(["x"]), name="local", tools=[python_tool(executor)])
    served = ServedSet({"boxed": elsewhere, "local": local})
    assert local_code_entries(served) == ["local"]
