"""The names the other layers code against stay exported."""

from __future__ import annotations

import cantata.agents as agents

REQUIRED = {
    "Agent",
    "AgentResponse",
    "AgentResponseStream",
    "AgentResponseUpdate",
    "AgentThread",
    "ChatAgent",
    "HistoryReducer",
    "InMemoryMessageStore",
    "LocalThread",
    "MessageStore",
    "ServiceThread",
    "StateStoreMessageStore",
    "SummarizingReducer",
    "TruncatingReducer",
    # added for issues 8 and 9
    "CHAT_OPTION_KEYWORDS",
    "CLOSE_TIMEOUT",
    "ChatOptionKeywords",
    "MAX_RENDER_CHARS",
    "MAX_RENDER_SECONDS",
    "UnknownOptionError",
}


def test_required_names_are_exported() -> None:
    assert set(agents.__all__) >= REQUIRED


def test_every_exported_name_imports() -> None:
    for name in agents.__all__:
        assert getattr(agents, name) is not None, name


def test_agent_is_abstract_in_run_only() -> None:
    assert agents.Agent.__abstractmethods__ == {"run"}
