"""Addresses: `AgentId` names one agent instance, `TopicId` names one broadcast topic.

Both are tuples underneath: they are looked up in dictionaries on every message, and a
tuple hashes and compares in C. They are values, so they travel to other processes as
JSON (registered in the core type registry) and have a string form with a parser. The two
classes are alike in shape on purpose: each is a small tuple type of its own.
"""

from __future__ import annotations

import re
from typing import Any

from ..core import ConfigurationError, register

__all__ = ["AgentId", "TopicId"]

_TYPE_RE = re.compile(r"[\w\-.]+\Z")
_TOPIC_TYPE_RE = re.compile(r"[\w\-.:=]+\Z")


def _check_type(value: object, pattern: re.Pattern[str], what: str, example: str) -> str:
    if type(value) is not str or not pattern.match(value):
        raise ConfigurationError(
            f"invalid {what} {value!r}: use letters, digits, '_', '-' or '.' "
            f"(for example {example!r})"
        )
    return value


def _check_key(value: object, what: str, owner: str) -> str:
    if type(value) is not str or not value:
        raise ConfigurationError(
            f"invalid {what} {value!r} for {owner!r}: it must be a non-empty string "
            "(use 'default' when there is only one)"
        )
    return value


class AgentId(tuple[str, str]):
    """The address of one agent instance: its registered `type` and a `key` (tenant, order).

    Messages to an `AgentId` whose type has a factory create the instance on first use.
    """

    __slots__ = ()

    def __new__(cls, type: str, key: str = "default") -> AgentId:
        _check_type(type, _TYPE_RE, "agent type", "checker")
        _check_key(key, "agent key", type)
        return tuple.__new__(cls, (type, key))

    @property
    def type(self) -> str:
        """The registered agent type (which factory makes it)."""
        return self[0]

    @property
    def key(self) -> str:
        """Which instance of the type (a tenant, an order, a run)."""
        return self[1]

    @classmethod
    def parse(cls, text: str) -> AgentId:
        """Read the string form ``type/key`` written by `str()`."""
        type_, sep, key = text.partition("/") if isinstance(text, str) else ("", "", "")
        if not sep:
            raise ConfigurationError(f"cannot parse agent id {text!r}: expected 'type/key'")
        return cls(type_, key)

    def __str__(self) -> str:
        return f"{self[0]}/{self[1]}"

    def __repr__(self) -> str:
        return f"AgentId(type={self[0]!r}, key={self[1]!r})"

    def __getnewargs__(self) -> tuple[str, str]:
        return (self[0], self[1])


class TopicId(tuple[str, str]):
    """A broadcast topic: its `type` (what kind of event) and `source` (whose: a tenant, a run).

    Type subscriptions route a topic to the agent whose key is the topic's source.
    """

    __slots__ = ()

    def __new__(cls, type: str, source: str = "default") -> TopicId:
        _check_type(type, _TOPIC_TYPE_RE, "topic type", "orders.created")
        _check_key(source, "topic source", type)
        return tuple.__new__(cls, (type, source))

    @property
    def type(self) -> str:
        """What kind of event the topic carries."""
        return self[0]

    @property
    def source(self) -> str:
        """Whose events: type subscriptions use it as the recipient's key."""
        return self[1]

    @classmethod
    def parse(cls, text: str) -> TopicId:
        """Read the string form ``type/source`` written by `str()`."""
        type_, sep, source = text.partition("/") if isinstance(text, str) else ("", "", "")
        if not sep:
            raise ConfigurationError(f"cannot parse topic id {text!r}: expected 'type/source'")
        return cls(type_, source)

    def __str__(self) -> str:
        return f"{self[0]}/{self[1]}"

    def __repr__(self) -> str:
        return f"TopicId(type={self[0]!r}, source={self[1]!r})"

    def __getnewargs__(self) -> tuple[str, str]:
        return (self[0], self[1])


def _encode(value: Any) -> dict[str, Any]:
    return {"id": str(value)}


register(
    AgentId, name="cantata.runtime.AgentId", encode=_encode, decode=lambda d: AgentId.parse(d["id"])
)
register(
    TopicId, name="cantata.runtime.TopicId", encode=_encode, decode=lambda d: TopicId.parse(d["id"])
)
