"""Subscriptions: type and prefix routing by topic source, class decorators, JSON."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cantata.core import ConfigurationError, dumps, loads
from cantata.runtime import (
    AgentId,
    LocalRuntime,
    MessageContext,
    RoutedAgent,
    TopicId,
    TypePrefixSubscription,
    TypeSubscription,
    default_subscriptions,
    message_handler,
    type_prefix_subscription,
    type_subscription,
)


def test_type_subscription_maps_topic_source_to_agent_key() -> None:
    sub = TypeSubscription("orders", "order_agent")
    assert sub.is_match(TopicId("orders", "o-17"))
    assert not sub.is_match(TopicId("orders.created", "o-17"))
    assert sub.map_to_agent(TopicId("orders", "o-17")) == AgentId("order_agent", "o-17")


def test_prefix_subscription_matches_by_prefix() -> None:
    sub = TypePrefixSubscription("orders.", "auditor")
    assert sub.is_match(TopicId("orders.created", "x"))
    assert not sub.is_match(TopicId("invoices", "x"))
    assert sub.map_to_agent(TopicId("orders.paid", "x")) == AgentId("auditor", "x")


def test_subscriptions_validate_and_round_trip_through_json() -> None:
    with pytest.raises(ConfigurationError):
        TypeSubscription("orders", "bad type")
    subs = [TypeSubscription("a", "b"), TypePrefixSubscription("p.", "q")]
    assert loads(dumps(subs)) == subs
    assert [s.id for s in loads(dumps(subs))] == [s.id for s in subs]


@type_subscription("alerts")
@type_prefix_subscription("metrics.")
class _Watcher(RoutedAgent):
    pass


@type_subscription("extra")
class _SubWatcher(_Watcher):
    pass


def test_decorators_declare_default_subscriptions_inherited_by_subclasses() -> None:
    ids = {s.id for s in default_subscriptions(_SubWatcher, "watch")}
    assert ids == {
        TypeSubscription("alerts", "watch").id,
        TypePrefixSubscription("metrics.", "watch").id,
        TypeSubscription("extra", "watch").id,
    }
    assert {s.id for s in default_subscriptions(_Watcher, "w")} == {
        "type:alerts->w",
        "prefix:metrics.->w",
    }


@dataclass
class _Hello:
    text: str


class _Listener(RoutedAgent):
    heard: list[tuple[str, str]] = []

    @message_handler
    async def on_hello(self, message: _Hello, ctx: MessageContext) -> None:
        _Listener.heard.append((str(self.id), message.text))


async def test_runtime_routes_by_type_and_prefix_and_stops_after_removal() -> None:
    _Listener.heard = []
    runtime = LocalRuntime()
    await runtime.register_factory("exact", _Listener)
    await runtime.register_factory("prefixed", _Listener)
    await runtime.add_subscription(TypeSubscription("orders.created", "exact"))
    await runtime.add_subscription(TypePrefixSubscription("orders.", "prefixed"))
    with pytest.raises(ConfigurationError, match="already exists"):
        await runtime.add_subscription(TypeSubscription("orders.created", "exact"))
    await runtime.start()
    await runtime.publish_message(_Hello("one"), TopicId("orders.created", "t1"))
    await runtime.publish_message(_Hello("two"), TopicId("orders.paid", "t2"))
    await runtime.remove_subscription("prefix:orders.->prefixed")
    await runtime.publish_message(_Hello("three"), TopicId("orders.paid", "t3"))
    with pytest.raises(ConfigurationError, match="no subscription"):
        await runtime.remove_subscription("prefix:orders.->prefixed")
    await runtime.stop_when_idle()
    assert sorted(_Listener.heard) == [
        ("exact/t1", "one"),
        ("prefixed/t1", "one"),
        ("prefixed/t2", "two"),
    ]


@type_subscription("greetings")
class _Greeter(_Listener):
    pass


async def test_registering_a_decorated_class_adds_its_subscriptions() -> None:
    _Listener.heard = []
    runtime = LocalRuntime()
    await runtime.register_factory("greeter", _Greeter)
    await runtime.register_factory("made", lambda: _Greeter(), agent_class=_Greeter)
    await runtime.start()
    await runtime.publish_message(_Hello("hi"), TopicId("greetings", "room"))
    await runtime.stop_when_idle()
    assert sorted(_Listener.heard) == [("greeter/room", "hi"), ("made/room", "hi")]


@dataclass(frozen=True)
class _VipOnly:
    """A custom subscription whose match depends on the topic source."""

    id: str = "vip"
    by_topic_type: bool = False

    def is_match(self, topic_id: TopicId) -> bool:
        return topic_id.type == "orders" and topic_id.source.startswith("vip-")

    def map_to_agent(self, topic_id: TopicId) -> AgentId:
        return AgentId("exact", topic_id.source)


async def test_a_custom_subscription_is_consulted_for_every_topic() -> None:
    _Listener.heard = []
    runtime = LocalRuntime()
    await runtime.register_factory("exact", _Listener)
    await runtime.add_subscription(_VipOnly())
    await runtime.start()
    for source in ("vip-1", "plain", "vip-2", "plain"):
        await runtime.publish_message(_Hello(source), TopicId("orders", source))
    await runtime.stop_when_idle()
    assert sorted(_Listener.heard) == [("exact/vip-1", "vip-1"), ("exact/vip-2", "vip-2")]


def test_map_to_agent_refuses_a_topic_the_subscription_does_not_match() -> None:
    exact = TypeSubscription("orders", "order_agent")
    with pytest.raises(
        ConfigurationError, match=r"'type:orders->order_agent'.*orders\.created/o-1"
    ):
        exact.map_to_agent(TopicId("orders.created", "o-1"))
    prefix = TypePrefixSubscription("orders.", "auditor")
    with pytest.raises(ConfigurationError, match=r"does not start with 'orders\.'"):
        prefix.map_to_agent(TopicId("invoices", "x"))


_TOPIC_TYPES = st.from_regex(r"[a-z][a-z0-9_.:-]{0,12}", fullmatch=True)


@given(topic_type=_TOPIC_TYPES, source=st.text(min_size=1, max_size=8), prefix=_TOPIC_TYPES)
def test_map_to_agent_answers_exactly_the_topics_is_match_accepts(
    topic_type: str, source: str, prefix: str
) -> None:
    try:
        topic = TopicId(topic_type, source)
    except ConfigurationError:
        return  # not a valid topic id: nothing to map
    for sub in (TypeSubscription(prefix, "a"), TypePrefixSubscription(prefix, "a")):
        if sub.is_match(topic):
            assert sub.map_to_agent(topic) == AgentId("a", source)
        else:
            with pytest.raises(ConfigurationError, match="does not match topic"):
                sub.map_to_agent(topic)
