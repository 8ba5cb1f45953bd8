"""Every public component class of cantata has a component config, or a stated reason why
not (`NO_CONFIG`): a class added later without an adapter fails here until it gets one."""

from __future__ import annotations

import importlib
import inspect

from cantata.agents import Agent, HistoryReducer
from cantata.declarative import provider_of, registered_providers
from cantata.declarative.registry import _BY_CLASS
from cantata.teams import SpeakerPolicy, Team, TerminationCondition
from cantata.tools import FunctionTool, MCPTools
from cantata.workflows import Workflow

PACKAGES = ("models", "tools", "agents", "teams", "workflows", "stores")
KINDS = (Agent, HistoryReducer, TerminationCondition, SpeakerPolicy, Team, Workflow,
         FunctionTool, MCPTools)  # fmt: skip
NO_CONFIG: dict[str, str] = {  # class name -> why it has no config
    "RoutingChatClient": "its route is a Python function of the request",
    "FallbackChatClient": "its rule (should_fall_back) is a Python function; build it in code",
}


def _is_component(cls: type, package: str) -> bool:
    if inspect.isabstract(cls) or getattr(cls, "_is_protocol", False):
        return False
    return (
        issubclass(cls, KINDS)
        or (hasattr(cls, "get_response") and hasattr(cls, "get_streaming_response"))
        or (package == "stores" and hasattr(cls, "append"))
        or (hasattr(cls, "save") and hasattr(cls, "list_checkpoints"))
    )


def test_every_public_component_has_a_config_or_a_reason() -> None:
    missing, seen = [], 0
    for package in PACKAGES:
        module = importlib.import_module(f"cantata.{package}")
        for name in module.__all__:
            cls = getattr(module, name)
            if not inspect.isclass(cls) or not _is_component(cls, package):
                continue
            seen += 1
            if name in NO_CONFIG:
                assert not any(c in _BY_CLASS for c in cls.__mro__), f"{name} has one now"
                continue
            if not any(c in _BY_CLASS for c in cls.__mro__):
                missing.append(f"cantata.{package}.{name}")
    assert not missing, f"public components without a config: {missing}"
    assert seen > 40 and len(registered_providers()) > 40


def test_the_provider_of_a_registered_class_is_its_public_path() -> None:
    from cantata.stores import RedisStore

    assert provider_of(RedisStore("redis://127.0.0.1:6379/0")).provider == (
        "cantata.stores.RedisStore"
    )
