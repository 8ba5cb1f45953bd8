"""Configs of the components holding a function (`Functional`, `FunctionPolicy`), written
by import path and loaded only from allowed paths; and of `External` termination."""

from __future__ import annotations

import json
from typing import Any

import pytest

from cantata.agents import ChatAgent
from cantata.core import Message
from cantata.declarative import SpecError, UntrustedProviderError, from_config, to_config
from cantata.models import OpenAIChatClient
from cantata.teams import ChatState, External, Functional, FunctionPolicy, GroupChat, MaxMessage

from . import _functions


def _module() -> str:
    return _functions.__name__


def _again(obj: Any, **options: Any) -> Any:
    config = json.loads(json.dumps(to_config(obj)))
    back = from_config(config, **options)
    assert type(back) is type(obj)
    assert to_config(back) == config
    return back


async def test_functional_round_trip_from_an_allowed_module() -> None:
    cond = Functional(_functions.said_done, name="done_check")
    config = to_config(cond)
    assert config["config"] == {"function": f"{_module()}.said_done", "name": "done_check"}
    back = _again(cond, allow=[_module()])
    assert back.fn is _functions.said_done and back.name == "done_check"
    with pytest.raises(UntrustedProviderError, match="not in the allow list"):
        from_config(config)


async def test_function_policy_round_trip_picks_like_the_original() -> None:
    policy = FunctionPolicy(_functions.always_second)
    back = _again(policy, allow=[_module()])
    state = ChatState(history=[Message("user", "hi")], participants=["a", "b"])
    assert (await back.select(state)).speaker == (await policy.select(state)).speaker == "b"


def test_external_round_trip_and_in_a_team() -> None:
    assert isinstance(_again(External()), External)
    agents = [ChatAgent(OpenAIChatClient("m", base_url="http://127.0.0.1:9/v1"), name=n)
              for n in ("a", "b")]  # fmt: skip
    team = GroupChat(
        agents,
        speaker=FunctionPolicy(_functions.always_second),
        termination=External() | Functional(_functions.said_done) | MaxMessage(4),
    )
    back = _again(team, allow=[_module()])
    assert isinstance(back.speaker, FunctionPolicy)


@pytest.mark.parametrize(
    "fn", [lambda messages: True, _functions.ChatState.__init__], ids=["lambda", "method"]
)
def test_a_function_without_an_import_path_is_refused(fn: Any) -> None:
    with pytest.raises(SpecError, match="has no import path"):
        to_config(Functional(fn))


@pytest.mark.parametrize(
    ("config", "match", "error"),
    [
        ({"function": "os.system"}, "not in the allow list", UntrustedProviderError),
        ({"function": "nodots"}, "import path", SpecError),
        ({"function": 3}, "import path", SpecError),
        ({"function": "os.path.nope"}, "cannot be imported", SpecError),
        ({"function": "os.path.sep"}, "not a function", SpecError),
        ({"function": "os.path.join", "extra": 1}, "unknown field", SpecError),
        ({}, "missing field", SpecError),
    ],
)
def test_bad_function_configs_are_typed_errors(
    config: dict[str, Any], match: str, error: type[Exception]
) -> None:
    for provider in ("cantata.teams.Functional", "cantata.teams.FunctionPolicy"):
        with pytest.raises(error, match=match):
            from_config({"provider": provider, "config": config}, allow=["os.path"])
