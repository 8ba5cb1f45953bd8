"""AgentId and TopicId: validation, string form, parser, JSON."""

from __future__ import annotations

import copy

import pytest

from cantata.core import ConfigurationError, dumps, loads
from cantata.runtime import AgentId, TopicId


def test_agent_id_fields_and_string_form_round_trip() -> None:
    agent_id = AgentId("checker", "tenant/42")
    assert (agent_id.type, agent_id.key) == ("checker", "tenant/42")
    assert str(agent_id) == "checker/tenant/42"
    assert AgentId.parse(str(agent_id)) == agent_id
    assert AgentId("solo").key == "default"


def test_topic_id_fields_and_string_form_round_trip() -> None:
    topic = TopicId("orders.created", "acme")
    assert (topic.type, topic.source) == ("orders.created", "acme")
    assert TopicId.parse(str(topic)) == topic


@pytest.mark.parametrize("bad", ["", "has space", "a/b", 3])
def test_invalid_agent_type_is_refused_with_the_value(bad: object) -> None:
    with pytest.raises(ConfigurationError, match="invalid agent type"):
        AgentId(bad, "k")  # type: ignore[arg-type]


def test_empty_key_and_unparsable_text_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="agent key"):
        AgentId("checker", "")
    with pytest.raises(ConfigurationError, match="expected 'type/key'"):
        AgentId.parse("no-slash")
    with pytest.raises(ConfigurationError, match="topic source"):
        TopicId("t", "")


def test_ids_are_hashable_values_that_survive_json_and_copy() -> None:
    agent_id, topic = AgentId("a", "k"), TopicId("t", "s")
    assert {agent_id: 1}[AgentId("a", "k")] == 1
    assert loads(dumps([agent_id, topic])) == [agent_id, topic]
    assert type(loads(dumps(agent_id))) is AgentId
    assert copy.deepcopy(agent_id) == agent_id
