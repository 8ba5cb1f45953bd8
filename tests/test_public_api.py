"""Every package's public surface: exported names resolve, carry docstrings, and the names
other layers and users build on stay exported."""

from __future__ import annotations

import importlib
import inspect

import pytest

PACKAGES = [
    "cantata.core",
    "cantata.stores",
    "cantata.runtime",
    "cantata.models",
    "cantata.models.embeddings",
    "cantata.tools",
    "cantata.agents",
    "cantata.workflows",
    "cantata.teams",
    "cantata.evals",
]

# Names that other layers and the README rely on: removing one is a breaking change.
KEPT = {
    "cantata.core": {"Message", "CantataError", "CancellationToken", "dumps", "loads", "register"},
    "cantata.stores": {
        "StateStore",
        "MemoryStore",
        "SQLiteStore",
        "open_store",
        "ItemStore",
        "InMemoryItemStore",
        "SQLiteItemStore",
        "open_item_store",
    },
    "cantata.runtime": {
        "AgentId",
        "TopicId",
        "TypeSubscription",
        "RoutedAgent",
        "MessageContext",
        "AgentRuntime",
        "LocalRuntime",
        "message_handler",
        "rpc",
        "event",
    },
    "cantata.models": {
        "ChatClient",
        "ChatOptions",
        "OpenAIChatClient",
        "LocalChatClient",
        "ScriptedChatClient",
        "RecordingChatClient",
        "ReplayChatClient",
    },
    "cantata.models.embeddings": {
        "EmbeddingClient",
        "OpenAIEmbeddingClient",
        "LocalEmbeddingClient",
        "HashEmbeddingClient",
    },
    "cantata.tools": {"tool", "FunctionTool", "FunctionInvokingChatClient"},
    "cantata.agents": {"Agent", "ChatAgent", "AgentThread", "AgentResponse", "LocalThread"},
    "cantata.workflows": {"WorkflowBuilder", "Workflow", "Executor", "AgentExecutor", "handler"},
    "cantata.teams": {
        "GroupChat",
        "RoundRobin",
        "Selector",
        "Handoff",
        "Swarm",
        "Sequential",
        "Concurrent",
        "Magentic",
        "TaskResult",
        "TextMention",
        "MaxMessage",
        "HandoffTermination",
        "register_agent",
    },
    "cantata.evals": {
        "Case",
        "Dataset",
        "EvalReport",
        "compare_reports",
        "dataset_from_cassette",
        "evaluate",
        "load_dataset",
    },
}


@pytest.mark.parametrize("package", PACKAGES)
def test_exports_resolve_and_are_documented(package: str) -> None:
    module = importlib.import_module(package)
    exported = module.__all__
    assert len(exported) == len(set(exported)), f"{package}.__all__ lists a name twice"
    undocumented = []
    for name in exported:
        value = getattr(module, name)  # raises if an export is missing
        if (inspect.isclass(value) or inspect.isfunction(value)) and not inspect.getdoc(value):
            undocumented.append(name)
    assert not undocumented, f"{package}: public names without a docstring: {undocumented}"


@pytest.mark.parametrize("package", PACKAGES)
def test_names_others_build_on_stay_exported(package: str) -> None:
    module = importlib.import_module(package)
    missing = KEPT[package] - set(module.__all__)
    assert not missing, f"{package} no longer exports {sorted(missing)}"


def test_the_team_type_and_the_termination_condition_have_distinct_names() -> None:
    teams = importlib.import_module("cantata.teams")
    assert issubclass(teams.Handoff, teams.Team)
    assert issubclass(teams.HandoffTermination, teams.TerminationCondition)
