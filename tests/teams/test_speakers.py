"""Speaker policies: round robin, functions of the state, and the model selector with its
candidates, repeats, custom picker, retries and fallback; every decision is an event."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pytest

from cantata.core import ConfigurationError, Message, ModelOutputError
from cantata.models import ChatOptions, ScriptedChatClient
from cantata.teams import (
    NEXT_IN_ORDER,
    PREVIOUS_SPEAKER,
    ChatState,
    GroupChat,
    RoundRobin,
    RoutingEvent,
    Selector,
    SpeakerChoice,
    TaskResult,
)

from ._agents import counting_agent

NAMES = ["planner", "coder", "tester"]


def _state(last: str | None = None, streak: int = 0, history: Sequence[Message] = ()) -> ChatState:
    return ChatState(list(history), NAMES, {n: f"the {n}" for n in NAMES}, last, streak)


def _answers(*texts: str) -> ScriptedChatClient:
    return ScriptedChatClient(list(texts))


def _team(speaker: object, turns: int = 3) -> GroupChat:
    return GroupChat([counting_agent(n) for n in NAMES], speaker=speaker, max_turns=turns)  # type: ignore[arg-type]


async def _routes(team: GroupChat, task: str = "go") -> tuple[list[RoutingEvent], TaskResult]:
    events: list[RoutingEvent] = []
    result = None
    async for item in team.create_session().run_stream(task):
        if isinstance(item, RoutingEvent):
            events.append(item)
        elif isinstance(item, TaskResult):
            result = item
    assert result is not None
    return events, result


async def test_round_robin_wraps_around() -> None:
    policy = RoundRobin()
    assert (await policy.select(_state())).speaker == "planner"
    assert (await policy.select(_state("tester"))).speaker == "planner"
    assert (await policy.select(_state("planner"))).speaker == "coder"


async def test_any_function_of_the_state_is_a_policy() -> None:
    def last_word_names_next(state: ChatState) -> str:
        return state.history[-1].text.split()[-1] if state.history else "planner"

    team = GroupChat(
        [counting_agent("coder"), counting_agent("tester")],
        speaker=lambda s: "tester" if s.last_speaker == "coder" else "coder",
        max_turns=3,
    )
    routes, result = await _routes(team)
    assert [r.choice for r in routes] == ["coder", "tester", "coder"]
    assert [m.author_name for m in result.messages[1:]] == ["coder", "tester", "coder"]
    bad = GroupChat([counting_agent("coder")], speaker=lambda s: "nobody", max_turns=1)
    with pytest.raises(Exception, match="'nobody', which is not a participant"):
        await bad.create_session().run("x")
    assert last_word_names_next(_state()) == "planner"


async def test_selector_uses_the_models_choice_constrained_to_candidates() -> None:
    client = _answers(json.dumps({"speaker": "coder"}))
    choice = await Selector(client, structured=True).select(_state("planner"))
    assert choice == SpeakerChoice("coder", "chosen by the model", False, ["coder", "tester"], [])
    # the request carried a schema whose only allowed values are the candidates' names
    fmt = client.calls[0].options.response_format
    assert isinstance(fmt, dict)
    assert fmt["properties"]["speaker"]["enum"] == ["coder", "tester"]
    prompt = client.calls[0].messages[0].text
    assert "coder" in prompt and "the tester" in prompt and "planner:" not in prompt


async def test_selector_excludes_the_last_speaker_unless_repeats_are_allowed() -> None:
    client = _answers(json.dumps({"speaker": "planner"}), json.dumps({"speaker": "planner"}))
    # planner spoke last: not a candidate, so the model's "planner" is invalid -> retried
    choice = await Selector(client, max_attempts=1).select(_state("planner"))
    assert choice.fallback_used and choice.speaker in ("coder", "tester")
    repeat = await Selector(client, allow_repeat=True).select(_state("planner", streak=1))
    assert repeat.speaker == "planner" and not repeat.fallback_used


async def test_selector_never_loops_forever_on_one_speaker() -> None:
    always_planner = ScriptedChatClient(lambda m, o: json.dumps({"speaker": "planner"}))
    selector = Selector(always_planner, allow_repeat=True, max_repeats=2, max_attempts=1)
    team = _team(selector, turns=6)
    routes, _ = await _routes(team)
    streak, longest = 0, 0
    for prev, cur in zip([None, *routes], routes, strict=False):
        streak = streak + 1 if prev is not None and prev.choice == cur.choice else 1
        longest = max(longest, streak)
    assert longest <= 2


async def test_selector_retries_invalid_answers_boundedly_then_falls_back() -> None:
    client = _answers("nobody", "still nobody", json.dumps({"speaker": "ghost"}))
    choice = await Selector(client, max_attempts=3).select(_state("planner"))
    assert choice.fallback_used
    assert choice.speaker == "coder"  # default fallback: next candidate in order
    assert choice.attempts == ["nobody", "still nobody", '{"speaker": "ghost"}']
    assert len(client.calls) == 3
    # each retry told the model what went wrong
    assert "not one of them" in client.calls[1].messages[-1].text
    named = await Selector(_answers("x"), max_attempts=1, fallback="tester").select(_state())
    assert named.speaker == "tester" and named.fallback_used


async def test_the_fallback_policy_is_next_in_order_or_autogens_previous_speaker() -> None:
    # default (and NEXT_IN_ORDER): the next candidate after the last speaker, in order;
    # PREVIOUS_SPEAKER (AutoGen's): the last speaker again, though allow_repeat=False had
    # ruled it out, and the first candidate when nobody has spoken
    for fallback in (None, NEXT_IN_ORDER):
        nxt = await Selector(_answers("x"), max_attempts=1, fallback=fallback).select(
            _state("coder")
        )
        assert nxt.speaker == "tester" and nxt.fallback_used
    prev = await Selector(_answers("x"), max_attempts=1, fallback=PREVIOUS_SPEAKER).select(
        _state("coder")
    )
    assert prev.speaker == "coder" and prev.fallback_used
    first = await Selector(_answers("x"), max_attempts=1, fallback=PREVIOUS_SPEAKER).select(
        _state()
    )
    assert first.speaker == "planner"
    assert NEXT_IN_ORDER == "next in order" and PREVIOUS_SPEAKER == "previous speaker"
    with pytest.raises(ConfigurationError, match="neither a policy"):
        Selector(_answers("x"), fallback="previous speakers")


async def test_the_previous_speaker_policy_in_a_chat_repeats_the_speaker() -> None:
    selector = Selector(_answers(*["?"] * 6), max_attempts=1, fallback=PREVIOUS_SPEAKER)
    routes, _ = await _routes(_team(selector, turns=3))
    assert [r.choice for r in routes] == ["planner", "planner", "planner"]
    assert all(r.fallback_used for r in routes)


async def test_selector_reads_plain_text_naming_one_candidate() -> None:
    choice = await Selector(_answers("I think the tester should go.")).select(_state("planner"))
    assert choice.speaker == "tester" and not choice.fallback_used
    both = await Selector(_answers("coder or tester"), max_attempts=1).select(_state("planner"))
    assert both.fallback_used  # naming two is not an answer


async def test_a_name_inside_another_word_is_not_a_mention() -> None:
    # "decoder" holds "coder" but does not name it; a name standing as a word of its
    # own, punctuation around it, does
    inside = await Selector(_answers("the decoder"), max_attempts=1).select(_state("planner"))
    assert inside.fallback_used
    word = await Selector(_answers("next: coder!")).select(_state("planner"))
    assert word.speaker == "coder" and not word.fallback_used


async def test_selector_survives_model_output_errors() -> None:
    client = ScriptedChatClient([ModelOutputError("bad json"), json.dumps({"speaker": "coder"})])
    choice = await Selector(client, structured=True).select(_state("planner"))
    assert choice.speaker == "coder" and choice.attempts == ["bad json"]


async def test_candidates_function_narrows_the_choice() -> None:
    client = _answers("anything")
    one = await Selector(client, candidates=lambda s: ["tester"]).select(_state())
    assert one == SpeakerChoice("tester", "the only candidate", candidates=["tester"])
    assert client.calls == []  # one candidate: no model call
    with pytest.raises(ConfigurationError, match="non-empty subset"):
        await Selector(client, candidates=lambda s: ["ghost"]).select(_state())


async def test_custom_picker_may_pick_or_defer_to_the_model() -> None:
    client = _answers(json.dumps({"speaker": "tester"}))

    def picker(state: ChatState) -> str | None:
        return "coder" if state.last_speaker == "planner" else None

    selector = Selector(client, selector_func=picker)
    picked = await selector.select(_state("planner"))
    assert picked.speaker == "coder" and picked.reason == "selector_func"
    assert client.calls == []
    deferred = await selector.select(_state("coder"))
    assert deferred.speaker == "tester" and deferred.reason == "chosen by the model"


async def test_every_decision_is_an_event_with_correlation_candidates_and_fallback() -> None:
    def script(messages: list[Message], options: ChatOptions) -> str:
        return "no idea"  # never valid: every decision falls back

    team = _team(Selector(ScriptedChatClient(script), max_attempts=2), turns=3)
    routes, result = await _routes(team)
    assert len(routes) == 3
    assert len({r.correlation_id for r in routes}) == 1 and routes[0].correlation_id
    assert all(r.fallback_used and r.attempts == ["no idea", "no idea"] for r in routes)
    assert [r.choice for r in routes] == ["planner", "coder", "tester"]
    assert routes[1].candidates == ["coder", "tester"]  # planner just spoke
    assert [m.author_name for m in result.messages[1:]] == ["planner", "coder", "tester"]


def test_selector_refuses_bad_settings() -> None:
    with pytest.raises(ConfigurationError, match="ChatClient"):
        Selector(object())  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="max_attempts"):
        Selector(_answers(), max_attempts=0)
    with pytest.raises(ConfigurationError, match="participants"):
        Selector(_answers(), prompt="no placeholder")
    with pytest.raises(ConfigurationError, match="SpeakerPolicy"):
        GroupChat([counting_agent("a")], speaker=42, max_turns=1)  # type: ignore[arg-type]


async def test_the_selector_prompt_shows_only_the_last_messages() -> None:
    history = [Message("assistant", f"m{i}", author_name="planner") for i in range(30)]
    client = _answers("coder")
    await Selector(client, max_history=3).select(_state("planner", history=history))
    prompt = client.calls[0].messages[0].text
    assert "planner: m29" in prompt and "planner: m27" in prompt
    assert "planner: m26" not in prompt


async def test_the_selector_prompt_follows_what_changed_since_the_last_turn() -> None:
    # the prompt's fixed parts and each message's line are made once: what changes since
    # (the prompt, the options, a message given more contents) shows at the next turn
    said = Message("assistant", "first", author_name="planner")
    history = [said]
    client = _answers("coder", "coder", "coder", "coder")
    selector = Selector(client, prompt="{participants} / {history}")
    state = _state("planner", history=history)
    await selector.select(state)
    assert client.calls[0].messages[0].text == "coder, tester / planner: first"
    said.contents.append(Message("assistant", " and more").contents[0])
    selector.prompt = "{participants!r} | {history:>5} | {roles}"  # str.format's own syntax
    selector.options = ChatOptions(temperature=0.5)
    await selector.select(state)
    assert client.calls[1].messages[0].text == (
        "'coder, tester' | planner: first and more | - coder: the coder\n- tester: the tester"
    )
    assert client.calls[1].options.temperature == 0.5
    assert client.calls[1].options.max_tokens == 64
