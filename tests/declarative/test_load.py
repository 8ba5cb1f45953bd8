"""load(): specs into agents and teams, placeholders, inputs, options, versions, types."""

from __future__ import annotations

from pathlib import Path

import pytest

from cantata.agents import ChatAgent, TruncatingReducer
from cantata.core import SchemaVersionError
from cantata.declarative import (
    SpecError,
    UnresolvedPlaceholderError,
    load,
    spec_types,
)
from cantata.models import ChatOptions, ScriptedChatClient
from cantata.teams import GroupChat, MaxMessage, OrTermination, Sequential, TextMention

AGENT = """
version: 1
type: chat_agent
name: helper
description: helps
instructions: "Help {{ who }} with ${Settings:topic}."
model:
  api: scripted
  connection: {script: ["hello there"]}
  options: {temperature: 0.25, max_tokens: 64, stop: ["END"]}
inputs:
  who: {default: Ann, description: the person}
history: 6
"""


async def test_agent_spec_runs_with_placeholders_inputs_and_options() -> None:
    agent = load(AGENT, settings={"topic": "maths"})
    assert isinstance(agent, ChatAgent)
    assert agent.instructions == "Help {{ who }} with maths."
    assert agent.arguments == {"who": "Ann"}
    assert agent.options == ChatOptions(temperature=0.25, max_tokens=64, stop=["END"])
    assert isinstance(agent.history_reducer, TruncatingReducer)
    assert agent.history_reducer.keep_last == 6
    async with agent:
        response = await agent.run("hi")
    assert response.text == "hello there"
    assert isinstance(agent.client, ScriptedChatClient)
    system = agent.client.calls[0].messages[0]
    assert system.text == "Help Ann with maths."
    assert agent.client.calls[0].options.temperature == 0.25


def test_load_from_path_and_dict(tmp_path: Path) -> None:
    path = tmp_path / "agent.yaml"
    path.write_text(AGENT, encoding="utf-8")
    assert load(path, settings={"topic": "x"}).name == "helper"
    assert load(str(path), settings={"topic": "x"}).name == "helper"
    data = {"version": 1, "type": "chat_agent", "name": "d", "model": {"api": "scripted"}}
    assert load(data).name == "d"


def test_env_placeholder_and_whole_value_keeps_its_type() -> None:
    spec = {
        "version": 1,
        "type": "chat_agent",
        "name": "e",
        "instructions": "key ${Env:MY_WORD}",
        "model": {"api": "scripted", "options": {"max_tokens": "${Settings:n}"}},
    }
    agent = load(spec, env={"MY_WORD": "xyzzy"}, settings={"n": 12})
    assert agent.instructions == "key xyzzy"
    assert agent.options.max_tokens == 12


def test_unresolved_placeholders_are_all_named() -> None:
    spec = {
        "version": 1,
        "type": "chat_agent",
        "name": "u",
        "instructions": "${Env:NOPE_1} and ${Settings:nope2}",
        "model": {"api": "openai", "id": "${Settings:model}"},
    }
    with pytest.raises(UnresolvedPlaceholderError) as info:
        load(spec, env={})
    text = str(info.value)
    for name in ("${Env:NOPE_1}", "${Settings:nope2}", "${Settings:model}"):
        assert name in text
    assert len(info.value.placeholders) == 3


def test_instructions_win_over_template() -> None:
    spec = {
        "version": 1,
        "type": "chat_agent",
        "name": "t",
        "instructions": "the instructions",
        "template": "the template",
        "model": {"api": "scripted"},
    }
    assert load(spec).instructions == "the instructions"
    del spec["instructions"]
    assert load(spec).instructions == "the template"


def test_response_format_becomes_a_chat_option() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "title": "A"}
    spec = {
        "version": 1,
        "type": "chat_agent",
        "name": "r",
        "model": {"api": "scripted"},
        "response_format": schema,
    }
    assert load(spec).options.response_format == schema


@pytest.mark.parametrize("version", [2, "1", 0, True, "v1"])
def test_unknown_version_is_refused(version: object) -> None:
    with pytest.raises(SchemaVersionError, match="version"):
        load({"version": version, "type": "chat_agent", "name": "v"})


def test_missing_version_and_unknown_type() -> None:
    with pytest.raises(SpecError, match="version: 1"):
        load({"type": "chat_agent", "name": "v"})
    with pytest.raises(SpecError, match="known types") as info:
        load({"version": 1, "type": "robot", "name": "v"})
    assert "chat_agent" in str(info.value) and "group_chat" in str(info.value)
    assert set(spec_types()) >= {"chat_agent", "group_chat", "sequential", "concurrent"}


def test_unknown_field_and_wrong_type_name_the_field() -> None:
    with pytest.raises(SpecError, match="colour"):
        load({"version": 1, "type": "chat_agent", "name": "v", "colour": "red"})
    with pytest.raises(SpecError, match="temperature"):
        load(
            {
                "version": 1,
                "type": "chat_agent",
                "name": "v",
                "model": {"api": "scripted", "options": {"temperature": "hot"}},
            }
        )
    with pytest.raises(SpecError, match="unknown chat option"):
        load(
            {
                "version": 1,
                "type": "chat_agent",
                "name": "v",
                "model": {"api": "scripted", "options": {"warmth": 1}},
            }
        )


def test_yaml_tags_that_build_objects_are_refused() -> None:
    text = "version: 1\ntype: chat_agent\nname: !!python/object/apply:os.getcwd []\n"
    with pytest.raises(SpecError, match="not valid YAML"):
        load(text)


def test_openai_model_needs_an_id_and_keeps_its_key_placeholder() -> None:
    spec = {"version": 1, "type": "chat_agent", "name": "o", "model": {"api": "openai"}}
    with pytest.raises(SpecError, match=r"model\.id"):
        load(spec)
    spec["model"] = {
        "api": "openai",
        "id": "m",
        "connection": {"base_url": "http://127.0.0.1:9/v1", "api_key": "${Env:K}"},
    }
    agent = load(spec, env={"K": "sk-test"})
    assert agent.client.model == "m"
    assert agent.client.base_url == "http://127.0.0.1:9/v1"


ROUND_ROBIN = """
version: 1
type: group_chat
name: review
participants:
  - name: writer
    instructions: Write.
    model: {api: scripted, connection: {script: ["draft one", "draft two"]}}
  - critic
speaker: {type: round_robin}
termination:
  any:
    - text_mention: APPROVE
    - max_messages: 5
"""


async def test_group_chat_spec_with_an_inline_and_a_referenced_agent() -> None:
    critic = ChatAgent(ScriptedChatClient(["fix it", "APPROVE"]), name="critic")
    team = load(ROUND_ROBIN, agents=[critic])
    assert isinstance(team, GroupChat)
    assert [a.name for a in team.participants] == ["writer", "critic"]
    assert isinstance(team.termination, OrTermination)
    kinds = {type(c) for c in team.termination.conditions}
    assert kinds == {TextMention, MaxMessage}
    result = await team.run("write a poem")
    texts = [m.text for m in result.messages]
    assert texts[-1] == "APPROVE"
    assert "draft one" in texts and "fix it" in texts


def test_referenced_agent_missing_names_it() -> None:
    with pytest.raises(SpecError, match="'critic' is referenced"):
        load(ROUND_ROBIN)


def test_sequential_spec_and_speaker_only_for_group_chat() -> None:
    spec = {
        "version": 1,
        "type": "sequential",
        "name": "s",
        "participants": [{"name": "a", "model": {"api": "scripted"}}],
    }
    assert isinstance(load(spec), Sequential)
    spec["speaker"] = {"type": "round_robin"}
    with pytest.raises(SpecError, match="group_chat teams only"):
        load(spec)


def test_selector_spec() -> None:
    from cantata.teams import Selector

    spec = {
        "version": 1,
        "type": "group_chat",
        "name": "sel",
        "participants": [
            {"name": "a", "description": "does a", "model": {"api": "scripted"}},
            {"name": "b", "description": "does b", "model": {"api": "scripted"}},
        ],
        "speaker": {
            "type": "selector",
            "model": {"api": "scripted", "connection": {"script": ["b"]}},
            "allow_repeat": True,
            "max_attempts": 2,
            "fallback": "a",
        },
        "max_turns": 3,
    }
    team = load(spec)
    assert isinstance(team.speaker, Selector)
    assert (team.speaker.allow_repeat, team.speaker.max_attempts) == (True, 2)
    assert team.speaker.fallback == "a" and team.max_turns == 3
    del spec["speaker"]["model"]
    with pytest.raises(SpecError, match="needs a model"):
        load(spec)
