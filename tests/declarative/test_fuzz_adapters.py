"""Hypothesis on the adapters of stores, remote agents, MCP servers, function holders and
agent views: a valid config with unknown fields added and known ones given values of any
type builds the component or raises a typed (`CantataError`) error, nothing else; what
starts a program or imports a function never loads unless allowed."""

from __future__ import annotations

import contextlib
import sys
from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st

from cantata.core import CantataError
from cantata.declarative import from_config
from cantata.teams import CodeRunnerAgent, Functional, FunctionPolicy
from cantata.tools import MCPTools

_CLIENT = {"provider": "cantata.models.OpenAIChatClient",
           "config": {"model": "m", "base_url": "http://127.0.0.1:9/v1"}}  # fmt: skip
_AGENT = {"provider": "cantata.agents.ChatAgent", "config": {"name": "a", "client": _CLIENT}}
BASES: dict[str, dict[str, Any]] = {
    "cantata.stores.PostgresStore": {
        "dsn": "postgresql://u@127.0.0.1:5432/test", "password": "p", "table_prefix": "p_",
        "min_size": 1, "max_size": 2, "connect_timeout": 1.0, "statement_timeout": 2.0,
    },
    "cantata.stores.RedisStore": {
        "url": "redis://127.0.0.1:6379/0", "password": "p", "prefix": "x:",
        "connect_timeout": 1.0, "timeout": 1.0,
    },
    "cantata.workflows.StateStoreCheckpointStore": {
        "store": {"provider": "cantata.stores.MemoryStore"},
    },
    "cantata.agents.ResponsesAgent": {
        "base_url": "http://127.0.0.1:9/v1", "model": "m", "name": "r", "description": "",
        "instructions": "i", "store": True, "api_key": "k", "timeout": 5.0,
    },
    "cantata.agents.A2AAgent": {
        "url": "http://127.0.0.1:9/a2a/x", "name": "x", "description": "", "token": "t",
        "timeout": 5.0,
    },
    "cantata.tools.MCPTools": {
        "url": "http://127.0.0.1:9/mcp", "headers": {"A": "b"}, "allow": ["t"],
        "require_approval": ["t"], "prefix": "p", "connect_timeout": 1.0, "call_timeout": 1.0,
    },
    "cantata.teams.Functional": {"function": "os.path.join", "name": "n"},
    "cantata.teams.FunctionPolicy": {"function": "os.path.join"},
    "cantata.teams.External": {},
    "cantata.teams.TeamAgent": {
        "team": {"provider": "cantata.teams.Sequential", "config": {"participants": [_AGENT]}},
        "name": "t", "description": "d",
    },
    "cantata.models.ReplayChatClient": {
        "cassette": {"schema_version": 1, "interactions": [
            {"request": {"messages": [], "options": {}, "stream": False}, "response": None,
             "updates": None, "error": None}]},
        "check_requests": True,
    },
    "cantata.models.RecordingChatClient": {"inner": _CLIENT, "path": "never/written.json"},
    "cantata.tools.FunctionInvokingChatClient": {
        "client": _CLIENT, "tools": [], "max_iterations": 3, "max_function_calls": None,
        "max_consecutive_errors": 2, "concurrent_calls": False,
        "retry_policy": {"attempts": 2, "retry_on": ["retryable"]},
    },
    "cantata.teams.CodeRunnerAgent": {
        "name": "c", "description": "d", "run_bare_text": False, "timeout": 5.0,
        "max_output": 100,
    },
}  # fmt: skip
_FIELDS = sorted({k for base in BASES.values() for k in base} | {"stdio", "env", "cwd"})
_SCALARS = (
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=30)
    | st.sampled_from(["os.system", "subprocess.run", "/bin/sh", "redis://", "host=x port=y",
                       "http://127.0.0.1:9", "${Env:NOPE}", "-1", "a b", "\x00", "::",
                       "http://[::1", "redis://[::1", "'", "x" * 300])
)  # fmt: skip
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner,
                                                                 max_size=3),
    max_leaves=8,
)  # fmt: skip
_ALLOW_ALL = ["os.path", "cantata.tools.MCPTools", "cantata.teams.CodeRunnerAgent"]


def _close(obj: Any) -> None:
    executor = getattr(obj, "executor", None)
    if executor is not None:
        executor.close()


@given(st.sampled_from(sorted(BASES)), st.data(), st.booleans())
@example("cantata.stores.PostgresStore", {"dsn": "'"}, False)
@example("cantata.stores.RedisStore", {"url": "redis://[::1"}, False)
@example("cantata.tools.MCPTools", {"url": None, "stdio": ["sh"]}, False)
@example("cantata.agents.ResponsesAgent", {"base_url": "::"}, False)
@example("cantata.agents.ResponsesAgent", {"base_url": "http://[::1"}, False)
@example("cantata.teams.CodeRunnerAgent", {"work_dir": "\x00"}, True)
@example("cantata.teams.CodeRunnerAgent", {"work_dir": "x" * 300}, True)
def test_mutated_adapter_configs_build_or_fail_typed(
    provider: str, data: st.DataObject | dict[str, Any], allowed: bool
) -> None:
    before = set(sys.modules)
    own = st.sampled_from(sorted(BASES[provider]) or _FIELDS)  # mostly its own fields
    keys = own | st.sampled_from(_FIELDS) | st.text(max_size=12)
    changes = (
        data
        if isinstance(data, dict)
        else data.draw(st.dictionaries(keys, _VALUES, min_size=1, max_size=4))
    )
    config = {**BASES[provider], **changes}
    built: Any = None
    with contextlib.suppress(CantataError):
        built = from_config(
            {"provider": provider, "config": config}, allow=_ALLOW_ALL if allowed else [], env={}
        )
    _close(built)
    if not allowed:
        assert not isinstance(built, CodeRunnerAgent | Functional | FunctionPolicy)
        assert not (isinstance(built, MCPTools) and built._stdio is not None)
    assert not (set(sys.modules) - before) & {"subprocess", "calendar", "shutil"}
