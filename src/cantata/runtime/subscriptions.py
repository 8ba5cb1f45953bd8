"""Subscriptions: which agent receives a message published to a topic.

A `TypeSubscription` sends topic type ``T`` to the agent of type ``A`` whose key is the
topic's source, so one subscription serves any number of tenants: the instance for each
tenant is created on its first event. Subscriptions are values (registered in the core
type registry) so the runtime's saved state can carry them. The two kinds are alike in
shape on purpose: each is a small value class of its own.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol, TypeVar, runtime_checkable

from ..core import ConfigurationError, register
from .ids import _TOPIC_TYPE_RE, _TYPE_RE, AgentId, TopicId, _check_type

__all__ = [
    "Subscription",
    "TypePrefixSubscription",
    "TypeSubscription",
    "default_subscriptions",
    "type_prefix_subscription",
    "type_subscription",
]

A = TypeVar("A", bound=type)


@runtime_checkable
class Subscription(Protocol):
    """Maps matching topics to recipients. `id` is unique within a runtime.

    `by_topic_type` is True when the match depends only on the topic's type, which lets a
    runtime cache the matching subscriptions per topic type.
    """

    @property
    def id(self) -> str:
        """Unique within a runtime; `remove_subscription` takes it."""
        ...

    @property
    def by_topic_type(self) -> bool:
        """True when `is_match` looks at the topic type only (lets the runtime cache)."""
        ...

    def is_match(self, topic_id: TopicId) -> bool:
        """Whether a message on `topic_id` goes to this subscription's agent."""
        ...

    def map_to_agent(self, topic_id: TopicId) -> AgentId:
        """The recipient of a message on a matching `topic_id`."""
        ...


@dataclass(frozen=True, slots=True)
class TypeSubscription:
    """Topic type `topic_type` goes to agent type `agent_type`, keyed by the topic's source."""

    topic_type: str
    agent_type: str
    id: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        _check_type(self.topic_type, _TOPIC_TYPE_RE, "topic type", "orders.created")
        _check_type(self.agent_type, _TYPE_RE, "agent type", "checker")
        if not self.id:
            object.__setattr__(self, "id", f"type:{self.topic_type}->{self.agent_type}")

    @property
    def by_topic_type(self) -> bool:
        """Always True: the match depends on the topic type only."""
        return True

    def is_match(self, topic_id: TopicId) -> bool:
        """True when the topic's type is exactly `topic_type`."""
        return topic_id[0] == self.topic_type

    def map_to_agent(self, topic_id: TopicId) -> AgentId:
        """The `agent_type` instance whose key is the topic's source; a topic this
        subscription does not match raises `ConfigurationError`."""
        if topic_id[0] != self.topic_type:
            raise _no_match(self, topic_id, f"its type is not {self.topic_type!r}")
        return AgentId(self.agent_type, topic_id[1])


def _no_match(sub: Subscription, topic_id: TopicId, why: str) -> ConfigurationError:
    return ConfigurationError(
        f"subscription {sub.id!r} does not match topic {topic_id} ({why}), so it maps it to "
        "no agent; check is_match(topic_id) first"
    )


@dataclass(frozen=True, slots=True)
class TypePrefixSubscription:
    """Every topic type starting with `topic_type_prefix` goes to `agent_type`, keyed by source."""

    topic_type_prefix: str
    agent_type: str
    id: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        _check_type(self.topic_type_prefix, _TOPIC_TYPE_RE, "topic type prefix", "orders.")
        _check_type(self.agent_type, _TYPE_RE, "agent type", "checker")
        if not self.id:
            object.__setattr__(self, "id", f"prefix:{self.topic_type_prefix}->{self.agent_type}")

    @property
    def by_topic_type(self) -> bool:
        """Always True: the match depends on the topic type only."""
        return True

    def is_match(self, topic_id: TopicId) -> bool:
        """True when the topic's type starts with `topic_type_prefix`."""
        return topic_id[0].startswith(self.topic_type_prefix)

    def map_to_agent(self, topic_id: TopicId) -> AgentId:
        """The `agent_type` instance whose key is the topic's source; a topic this
        subscription does not match raises `ConfigurationError`."""
        if not topic_id[0].startswith(self.topic_type_prefix):
            why = f"its type does not start with {self.topic_type_prefix!r}"
            raise _no_match(self, topic_id, why)
        return AgentId(self.agent_type, topic_id[1])


register(TypeSubscription, name="cantata.runtime.TypeSubscription")
register(TypePrefixSubscription, name="cantata.runtime.TypePrefixSubscription")

# A default subscription is declared on a class before its agent type name is known, so it
# is kept as a template: a function of the agent type that makes the subscription.
_Template = Callable[[str], Subscription]
_ATTR = "__cantata_subscriptions__"


def _declare(cls: A, template: _Template) -> A:
    if not isinstance(cls, type):
        raise ConfigurationError(f"subscription decorators apply to agent classes, not to {cls!r}")
    own: list[_Template] = list(cls.__dict__.get(_ATTR, ()))
    own.append(template)
    setattr(cls, _ATTR, tuple(own))
    return cls


def type_subscription(topic_type: str) -> Callable[[A], A]:
    """Class decorator: the agent type registered for this class receives `topic_type`.

    Each topic source gets its own instance (`AgentId(agent_type, source)`).
    """
    _check_type(topic_type, _TOPIC_TYPE_RE, "topic type", "orders.created")
    return lambda cls: _declare(cls, lambda agent_type: TypeSubscription(topic_type, agent_type))


def type_prefix_subscription(topic_type_prefix: str) -> Callable[[A], A]:
    """Class decorator: the agent type receives every topic type starting with the prefix."""
    _check_type(topic_type_prefix, _TOPIC_TYPE_RE, "topic type prefix", "orders.")
    return lambda cls: _declare(
        cls, lambda agent_type: TypePrefixSubscription(topic_type_prefix, agent_type)
    )


def default_subscriptions(cls: type, agent_type: str) -> list[Subscription]:
    """The subscriptions that the decorators on `cls` (and its bases) declare for `agent_type`."""
    templates: list[_Template] = []
    for klass in reversed(cls.__mro__):
        templates.extend(klass.__dict__.get(_ATTR, ()))
    subs: dict[str, Subscription] = {}
    for template in templates:
        sub = template(agent_type)
        subs.setdefault(sub.id, sub)
    return list(subs.values())
