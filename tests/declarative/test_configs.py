"""Component configs: a round trip per component kind, trusted providers, secrets."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from cantata.agents import ChatAgent, SummarizingReducer, TruncatingReducer
from cantata.core import ConfigurationError, SchemaVersionError
from cantata.declarative import (
    SpecError,
    UntrustedProviderError,
    from_config,
    registered_providers,
    to_config,
)
from cantata.models import ChatOptions, LocalChatClient, OpenAIChatClient
from cantata.stores import MemoryStore, SQLiteStore
from cantata.teams import (
    Concurrent,
    FunctionCall,
    GroupChat,
    HandoffTermination,
    MaxMessage,
    RoundRobin,
    Selector,
    Sequential,
    SourceMatch,
    TextMention,
    Timeout,
    TokenUsage,
)
from cantata.tools import tool

from . import _weather_tools as weather_tools


def _server() -> OpenAIChatClient:
    return OpenAIChatClient(
        "m",
        base_url="http://127.0.0.1:9/v1",
        api_key="sk-secret-value",
        default_options=ChatOptions(temperature=0.1),
    )


def _agent(name: str = "a") -> ChatAgent:
    return ChatAgent(
        _server(),
        name=name,
        description="d",
        instructions="Be {{ tone }}.",
        arguments={"tone": "brief"},
        tools=[tool(weather_tools.get_weather)],
        options=ChatOptions(max_tokens=10, stop=["x"], response_format={"type": "object"}),
        history_reducer=TruncatingReducer(4),
    )


def _again(obj: Any) -> tuple[dict[str, Any], Any]:
    """The config (through JSON text) and the component loaded back from it."""
    config = json.loads(json.dumps(to_config(obj)))
    return config, from_config(config, tools=[weather_tools.get_weather])


def _same(obj: Any) -> Any:
    config, back = _again(obj)
    assert type(back) is type(obj)
    assert to_config(back) == config
    return back


def test_model_clients_round_trip() -> None:
    back = _same(_server())
    assert (back.model, back.base_url) == ("m", "http://127.0.0.1:9/v1")
    assert back.default_options == ChatOptions(temperature=0.1)
    local = _same(LocalChatClient(n_ctx=1024, seed=7, parallel=2))
    assert local.model_path == LocalChatClient().model_path


def test_tool_round_trip_by_reference() -> None:
    t = tool(weather_tools.get_weather)
    config, back = _again(t)
    assert config["config"]["id"] == f"{weather_tools.__name__}.get_weather"
    assert back is t or back.func is weather_tools.get_weather


def test_agent_round_trip() -> None:
    agent = _same(_agent())
    assert agent.instructions == "Be {{ tone }}."
    assert agent.arguments == {"tone": "brief"}
    assert agent.options.max_tokens == 10 and agent.options.stop == ["x"]
    assert [t.name for t in agent.tools] == ["get_weather"]
    assert isinstance(agent.history_reducer, TruncatingReducer)
    assert agent.owns_client


def test_agent_loop_limit_and_retry_policy_round_trip() -> None:
    from cantata.core import RetryPolicy

    policy = RetryPolicy(attempts=4, initial_delay=0.1, jitter=0.0, retry_on={"retryable"})
    agent = ChatAgent(_server(), name="r", max_iterations=3, retry_policy=policy)
    back = _same(agent)
    assert back.max_iterations == 3 and back.retry_policy == policy
    assert to_config(agent)["config"]["retry_policy"]["retry_on"] == ["retryable"]
    assert _same(ChatAgent(_server(), name="plain")).retry_policy is None
    bad = to_config(agent)
    for wrong, match in (({"attempts": 0}, "attempts"), ({"tries": 2}, "unknown field"),
                         ({"jitter": "0"}, "must be float"), ([], "must be a mapping"),
                         ({"retry_on": ["sometimes"]}, "unknown classes")):  # fmt: skip
        bad["config"]["retry_policy"] = wrong
        with pytest.raises(ConfigurationError, match=match):
            from_config(bad, tools=[weather_tools.get_weather])


def test_reducers_round_trip() -> None:
    assert _same(TruncatingReducer(3, keep_system=False)).keep_system is False
    r = _same(SummarizingReducer(_server(), keep_last=5, threshold=2, prompt="Sum up."))
    assert (r.keep_last, r.threshold, r.prompt) == (5, 2, "Sum up.")


@pytest.mark.parametrize(
    "condition",
    [
        MaxMessage(4),
        TextMention("DONE", sources=["b", "a"]),
        SourceMatch(["x"]),
        HandoffTermination("user"),
        FunctionCall("finish"),
        Timeout(30),
        TokenUsage(max_total_tokens=100),
        MaxMessage(4) | TextMention("DONE"),
        MaxMessage(4) & (HandoffTermination("user") | Timeout(2.5)),
    ],
    ids=repr,
)
def test_termination_round_trip(condition: Any) -> None:
    back = _same(condition)
    assert repr(back) == repr(condition)


def test_speaker_policies_round_trip() -> None:
    _same(RoundRobin())
    s = _same(Selector(_server(), allow_repeat=True, max_attempts=2, fallback="a"))
    assert (s.allow_repeat, s.max_attempts, s.fallback) == (True, 2, "a")


def test_teams_round_trip() -> None:
    chat = _same(
        GroupChat(
            [_agent("a"), _agent("b")],
            speaker=RoundRobin(),
            termination=MaxMessage(3),
            max_turns=5,
            name="chat",
            history_reducer=TruncatingReducer(8),
        )
    )
    assert isinstance(chat.history_reducer, TruncatingReducer)
    assert [a.name for a in chat.participants] == ["a", "b"] and chat.max_turns == 5
    seq = _same(Sequential([_agent("a")], chain_only_agent_responses=True, name="s"))
    assert seq.chain_only_agent_responses
    _same(Concurrent([_agent("a"), _agent("b")], name="c"))
    with pytest.raises(SpecError, match="aggregator"):
        to_config(Concurrent([_agent("a")], aggregator=lambda answers: answers[0]))


def test_stores_round_trip(tmp_path: Path) -> None:
    from cantata.workflows import FileCheckpointStore, InMemoryCheckpointStore

    _same(InMemoryCheckpointStore())
    assert _same(FileCheckpointStore(tmp_path / "cp")).directory == str(tmp_path / "cp")
    _same(MemoryStore())
    assert _same(SQLiteStore(tmp_path / "x.db")).path == str(tmp_path / "x.db")


def test_secrets_are_left_out_or_written_as_placeholders() -> None:
    text = json.dumps(to_config(_agent()))
    assert "sk-secret-value" not in text and "api_key" not in text
    with_secrets = json.dumps(to_config(_agent(), include_secrets=True))
    assert "sk-secret-value" not in with_secrets
    config = to_config(_server(), include_secrets=True)
    assert config["config"]["api_key"] == "${Env:OPENAI_API_KEY}"
    back = from_config(config, env={"OPENAI_API_KEY": "sk-other"})
    assert back.model == "m"


def test_unknown_and_untrusted_providers_are_refused_without_import() -> None:
    sys.modules.pop("calendar", None)
    bad = {"provider": "calendar.TextCalendar", "component_type": "x", "version": 1}
    with pytest.raises(UntrustedProviderError, match="allow"):
        from_config(bad)
    assert "calendar" not in sys.modules
    with pytest.raises(UntrustedProviderError):
        from_config({"provider": "cantata.core.Message", "config": {}})
    with pytest.raises(SchemaVersionError, match="version 9"):
        from_config({"provider": "cantata.teams.MaxMessage", "version": 9, "config": {}})
    with pytest.raises(SpecError, match="unknown field"):
        from_config({"provider": "cantata.teams.RoundRobin", "config": {}, "code": "x"})
    assert "cantata.agents.ChatAgent" in registered_providers()


class Widget:
    """A component of the caller's own, loaded through the allow list."""

    def __init__(self, size: int) -> None:
        self.size = size

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> Widget:
        return cls(int(config["size"]))


def test_allowed_provider_with_from_config() -> None:
    provider = f"{__name__}.Widget"
    data = {"provider": provider, "component_type": "widget", "version": 1, "config": {"size": 3}}
    with pytest.raises(UntrustedProviderError):
        from_config(data)
    assert from_config(data, allow=[__name__]).size == 3


class _DelegatingAgent(ChatAgent):
    """A subclass with the one-line delegating method the classes may get."""

    def to_config(self) -> dict[str, Any]:
        return to_config(self)


def test_a_delegating_to_config_method_does_not_recurse() -> None:
    agent = _DelegatingAgent(_server(), name="d")
    config = agent.to_config()
    assert config["provider"] == "cantata.agents.ChatAgent"
    assert config["config"]["name"] == "d"
