"""Subscriptions: type and prefix routing by topic source, class decorators, JSON."""

from __future__ import annotations

import pytest

from cantata.core import ConfigurationError, dumps, loads
from cantata.runtime import (
    AgentId,
    RoutedAgent,
    TopicId,
    TypePrefixSubscription,
    TypeSubscription,
    default_subscriptions,
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
