"""The public surface of cantata.runtime imports and stays exported."""

from __future__ import annotations

import cantata.runtime as runtime_pkg
from cantata.runtime import AgentRuntime, LocalRuntime

FIXED = {
    "AgentId",
    "TopicId",
    "TypeSubscription",
    "TypePrefixSubscription",
    "type_subscription",
    "BaseAgent",
    "RoutedAgent",
    "message_handler",
    "rpc",
    "event",
    "MessageContext",
    "AgentRuntime",
    "LocalRuntime",
    "InterventionHandler",
    "DROP",
}


def test_every_exported_name_imports_and_the_fixed_names_are_there() -> None:
    assert set(runtime_pkg.__all__) >= FIXED
    for name in runtime_pkg.__all__:
        assert getattr(runtime_pkg, name) is not None, name


def test_local_runtime_implements_the_runtime_protocol() -> None:
    assert isinstance(LocalRuntime(), AgentRuntime)
    for method in ("start", "stop", "stop_when_idle", "stop_when", "close", "__aenter__"):
        assert callable(getattr(LocalRuntime, method))
