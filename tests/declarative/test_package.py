"""The package surface: exports, docstrings, built-ins reported together, layering."""

from __future__ import annotations

import inspect
import subprocess
import sys

import pytest

import cantata.declarative as declarative
from cantata.core import ConfigurationError


def test_exports_resolve_and_have_docstrings() -> None:
    for name in declarative.__all__:
        obj = getattr(declarative, name)
        if inspect.isclass(obj) or inspect.isfunction(obj):
            assert inspect.getdoc(obj), name


def test_every_kind_has_a_builtin_provider() -> None:
    providers = set(declarative.registered_providers())
    for needed in (
        "cantata.models.OpenAIChatClient", "cantata.models.LocalChatClient",
        "cantata.tools.FunctionTool", "cantata.agents.ChatAgent",
        "cantata.agents.TruncatingReducer", "cantata.teams.MaxMessage",
        "cantata.teams.RoundRobin", "cantata.teams.Selector", "cantata.teams.GroupChat",
        "cantata.teams.Handoff", "cantata.teams.Magentic", "cantata.workflows.Workflow",
        "cantata.stores.SQLiteStore", "cantata.stores.PostgresStore",
        "cantata.stores.RedisStore", "cantata.workflows.StateStoreCheckpointStore",
        "cantata.agents.ResponsesAgent", "cantata.agents.A2AAgent", "cantata.tools.MCPTools",
        "cantata.teams.TeamAgent", "cantata.workflows.WorkflowAgent",
        "cantata.teams.CodeRunnerAgent", "cantata.teams.Functional", "cantata.teams.External",
        "cantata.teams.FunctionPolicy", "cantata.models.RecordingChatClient",
        "cantata.models.ReplayChatClient", "cantata.tools.FunctionInvokingChatClient",
    ):  # fmt: skip
        assert needed in providers


def test_builtin_failures_are_reported_together(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        declarative, "_BUILTINS", ("_missing_one", "_builtin_teams", "_missing_two")
    )
    with pytest.raises(ConfigurationError) as info:
        declarative._load_builtins()
    assert "_missing_one" in str(info.value) and "_missing_two" in str(info.value)


def test_importing_declarative_imports_no_later_layer() -> None:
    code = (
        "import sys, cantata.declarative; "
        "print(sorted(m for m in sys.modules if m.startswith(('cantata.serve', 'cantata.cli'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
