"""Speaker policies: who speaks next in a group chat.

A policy is a definition shared by every run; it decides from the conversation's state
(`ChatState`) alone, so concurrent runs never share a decision. `RoundRobin` takes turns
in order; `Selector` asks a model to pick among candidates (constrained by a JSON schema
whose only allowed values are the candidates' names, which the local model enforces with
a grammar; any other answer is retried, boundedly, then a fallback picks); and any
function of the state is a policy too.
"""

from __future__ import annotations

import inspect
import json
import re
import string
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from ..core import (
    CancellationToken,
    ConfigurationError,
    DataContent,
    Message,
    ModelOutputError,
    TextContent,
)
from ..models import ChatClient, ChatOptions, LocalChatClient

__all__ = [
    "DEFAULT_SELECTOR_PROMPT",
    "FALLBACK_POLICIES",
    "NEXT_IN_ORDER",
    "PREVIOUS_SPEAKER",
    "ChatState",
    "FunctionPolicy",
    "RoundRobin",
    "Selector",
    "SpeakerChoice",
    "SpeakerFunction",
    "SpeakerPolicy",
    "as_policy",
]


@dataclass(slots=True)
class ChatState:
    """The conversation as a speaker policy sees it."""

    history: Sequence[Message]
    """The whole history, tool traffic included."""
    participants: Sequence[str]
    descriptions: Mapping[str, str] = field(default_factory=dict)
    last_speaker: str | None = None
    streak: int = 0
    """How many turns in a row `last_speaker` has taken."""
    turn: int = 0
    """Turns taken so far in this team run."""
    correlation_id: str = ""

    @property
    def transcript(self) -> list[Message]:
        """The messages that carry text or data (what people would read)."""
        return [m for m in self.history if _readable(m)]


@dataclass(slots=True)
class SpeakerChoice:
    """A decision: who speaks, why, among whom, and whether a fallback chose."""

    speaker: str
    reason: str = ""
    fallback_used: bool = False
    candidates: list[str] | None = None
    attempts: list[str] = field(default_factory=list)


class SpeakerPolicy(ABC):
    """Picks the next speaker of a group chat."""

    @abstractmethod
    async def select(
        self, state: ChatState, *, cancellation_token: CancellationToken | None = None
    ) -> SpeakerChoice:
        """The next speaker; it must be one of `state.participants`."""


class RoundRobin(SpeakerPolicy):
    """Everyone in turn, in the order the participants were given."""

    async def select(
        self, state: ChatState, *, cancellation_token: CancellationToken | None = None
    ) -> SpeakerChoice:
        return self.next_of(state.last_speaker, state.participants)

    reason = "round robin"
    """The reason its routing decisions give."""

    @staticmethod
    def next_of(last: str | None, participants: Sequence[str]) -> SpeakerChoice:
        """The round robin's choice after `last` (the first participant when None)."""
        return SpeakerChoice(_after(last, participants), RoundRobin.reason)

    @staticmethod
    def after(last: str | None, participants: Sequence[str]) -> str:
        """The name `next_of` chooses (no choice object: a team's turn asks it each time)."""
        return _after(last, participants)

    def __repr__(self) -> str:
        return "RoundRobin()"


def _after(last: str | None, order: Sequence[str]) -> str:
    if last is None or last not in order:
        return order[0]
    return order[(order.index(last) + 1) % len(order)]


SpeakerAnswer: TypeAlias = str | SpeakerChoice | None
SpeakerFunction: TypeAlias = Callable[[ChatState], SpeakerAnswer | Awaitable[SpeakerAnswer]]
"""A function of the conversation state naming the next speaker (sync or async)."""


async def _ask(fn: SpeakerFunction, state: ChatState) -> SpeakerAnswer:
    answer = fn(state)
    if inspect.isawaitable(answer):
        answer = await answer
    if answer is not None and not isinstance(answer, str | SpeakerChoice):
        raise ConfigurationError(
            f"speaker function {getattr(fn, '__name__', fn)!r} returned {answer!r}; return a "
            "participant's name, a SpeakerChoice, or None"
        )
    return answer


def _checked(answer: str | SpeakerChoice, state: ChatState, origin: str) -> SpeakerChoice:
    choice = answer if isinstance(answer, SpeakerChoice) else SpeakerChoice(answer, origin)
    if choice.speaker not in state.participants:
        raise ConfigurationError(
            f"{origin} picked {choice.speaker!r}, which is not a participant; participants are "
            f"{list(state.participants)}"
        )
    return choice


class FunctionPolicy(SpeakerPolicy):
    """A function of the `ChatState` picks the next speaker."""

    def __init__(self, fn: SpeakerFunction) -> None:
        if not callable(fn):
            raise ConfigurationError(f"a speaker function must be callable, got {fn!r}")
        self.fn = fn
        self._name = getattr(fn, "__name__", "speaker function")

    async def select(
        self, state: ChatState, *, cancellation_token: CancellationToken | None = None
    ) -> SpeakerChoice:
        answer = await _ask(self.fn, state)
        if answer is None:
            raise ConfigurationError(
                f"speaker function {self._name!r} returned None and no model is there to pick "
                "instead; return a name, or use Selector(client, selector_func=...)"
            )
        return _checked(answer, state, f"speaker function {self._name!r}")


def as_policy(speaker: SpeakerPolicy | SpeakerFunction) -> SpeakerPolicy:
    """A policy, or a function of the state made one."""
    if isinstance(speaker, SpeakerPolicy):
        return speaker
    if callable(speaker):
        return FunctionPolicy(speaker)
    raise ConfigurationError(
        f"speaker must be a SpeakerPolicy (RoundRobin(), Selector(...)) or a function of the "
        f"ChatState, got {speaker!r}"
    )


DEFAULT_SELECTOR_PROMPT = (
    "You pick who speaks next in a team conversation.\n\n"
    "Team members:\n{roles}\n\n"
    "Conversation so far:\n{history}\n\n"
    "Which member should speak next? Answer with one name from: {participants}."
)
"""The selector's default prompt; ``{roles}``, ``{history}`` and ``{participants}`` are filled."""

Candidates: TypeAlias = Callable[[ChatState], Sequence[str] | Awaitable[Sequence[str]]]
Fallback: TypeAlias = str | Callable[[ChatState], str]

NEXT_IN_ORDER = "next in order"
"""Selector fallback policy (the default): the next candidate after the last speaker, in
the team's order, as a round robin would pick."""
PREVIOUS_SPEAKER = "previous speaker"
"""Selector fallback policy, AutoGen's: the last speaker again (the first candidate when
nobody has spoken yet), even where `allow_repeat=False` had ruled it out."""
FALLBACK_POLICIES = (NEXT_IN_ORDER, PREVIOUS_SPEAKER)
"""The named fallback policies. Each has a space, which no agent name has, so a policy is
never mistaken for a participant."""


class Selector(SpeakerPolicy):
    """A model picks the next speaker among the candidates.

    - `candidates(state)` narrows who may speak (default: everyone);
    - `allow_repeat=False` keeps the last speaker from speaking twice in a row (when there
      is someone else); with ``allow_repeat=True`` nobody speaks more than `max_repeats`
      turns in a row, so the chat never loops forever on one speaker;
    - `selector_func(state)` may pick instead of the model, or return None to let it pick;
    - the model's answer is constrained to the candidates' names by a JSON schema (a
      grammar on the local model, so it is always valid); an answer that is not a
      candidate is retried up to `max_attempts` times, then `fallback` picks: a policy,
      `NEXT_IN_ORDER` (``"next in order"``, the default: the next candidate after the last
      speaker in the team's order) or `PREVIOUS_SPEAKER` (``"previous speaker"``,
      AutoGen's: the last speaker again, or the first candidate when nobody spoke yet);
      or a participant's name; or a function of the state.

    Every decision says why and whether the fallback chose (see `RoutingEvent`).
    """

    def __init__(
        self,
        client: ChatClient,
        *,
        prompt: str = DEFAULT_SELECTOR_PROMPT,
        candidates: Candidates | None = None,
        allow_repeat: bool = False,
        max_repeats: int = 3,
        selector_func: SpeakerFunction | None = None,
        fallback: Fallback | None = None,
        max_attempts: int = 3,
        max_history: int = 20,
        structured: bool | None = None,
        options: ChatOptions | None = None,
    ) -> None:
        if not isinstance(client, ChatClient):
            raise ConfigurationError(f"Selector needs a ChatClient, got {client!r}")
        if max_attempts < 1 or max_repeats < 1 or max_history < 0:
            raise ConfigurationError(
                "Selector needs max_attempts >= 1, max_repeats >= 1 and max_history >= 0"
            )
        for key in ("{participants}",):
            if key not in prompt:
                raise ConfigurationError(f"the selector prompt must contain {key}")
        if isinstance(fallback, str) and " " in fallback and fallback not in FALLBACK_POLICIES:
            raise ConfigurationError(
                f"the selector's fallback {fallback!r} is neither a policy {FALLBACK_POLICIES} "
                "nor an agent name (agent names have no spaces)"
            )
        self.client = client
        self.prompt = prompt
        self.candidates = candidates
        self.allow_repeat = allow_repeat
        self.max_repeats = max_repeats
        self.selector_func = selector_func
        self.fallback = fallback
        self.max_attempts = max_attempts
        self.max_history = max_history
        self.structured = isinstance(client, LocalChatClient) if structured is None else structured
        self.options = options
        self._template = (prompt, _template(prompt))
        self._asks: dict[tuple[str, ...], _Ask] = {}
        """What a turn's request needs besides the history, per candidate list (a team
        has a few): made once each, not at every turn."""

    async def select(
        self, state: ChatState, *, cancellation_token: CancellationToken | None = None
    ) -> SpeakerChoice:
        if self.selector_func is not None:
            answer = await _ask(self.selector_func, state)
            if answer is not None:
                return _checked(answer, state, "selector_func")
        names = await self._candidates(state)
        if len(names) == 1:
            return SpeakerChoice(names[0], "the only candidate", candidates=names)
        attempts: list[str] = []
        ask = self._ask_for(state, names)
        messages = [Message("user", self._render(state, names, ask))]
        options = ask.options
        for _ in range(self.max_attempts):
            if cancellation_token is not None:
                cancellation_token.raise_if_cancelled()
            try:
                response = await self.client.get_response(
                    messages, options=options, cancellation_token=cancellation_token
                )
                text, value = response.text, response.value
            except ModelOutputError as exc:
                text, value = str(exc), None
            name = _parse(text, value, names)
            if name is not None:
                return SpeakerChoice(name, "chosen by the model", False, names, attempts)
            attempts.append(text)
            messages += [
                Message("assistant", text or "(no answer)"),
                Message("user", f"That is not one of them. Answer with exactly one of: {names}."),
            ]
        return SpeakerChoice(
            self._fall_back(state, names),
            f"fallback after {len(attempts)} answers that were not candidates",
            True,
            names,
            attempts,
        )

    async def _candidates(self, state: ChatState) -> list[str]:
        names = list(state.participants)
        if self.candidates is not None:
            given = self.candidates(state)
            if inspect.isawaitable(given):
                given = await given
            names = [n for n in state.participants if n in set(given)]
            unknown = sorted(set(given) - set(state.participants))
            if unknown or not names:
                raise ConfigurationError(
                    f"the selector's candidates function returned {list(given)!r}; candidates "
                    f"must be a non-empty subset of the participants {list(state.participants)}"
                )
        last = state.last_speaker
        too_many = self.allow_repeat and state.streak >= self.max_repeats
        if last in names and len(names) > 1 and (not self.allow_repeat or too_many):
            names.remove(last)
        return names

    def _ask_for(self, state: ChatState, names: list[str]) -> _Ask:
        key = tuple(names)
        ask = self._asks.get(key)
        if (
            ask is None
            or ask.descriptions is not state.descriptions
            or ask.base is not self.options
        ):
            roles = "\n".join(
                f"- {n}: {state.descriptions.get(n, '') or 'a participant'}" for n in names
            )
            fmt = _schema(names) if self.structured else None
            options = ChatOptions(response_format=fmt, max_tokens=64).merge(self.options)
            ask = _Ask(state.descriptions, self.options, roles, ", ".join(names), options)
            if len(self._asks) >= _ASKS_KEPT:
                self._asks.clear()
            self._asks[key] = ask
        return ask

    def _render(self, state: ChatState, names: list[str], ask: _Ask | None = None) -> str:
        """The prompt for this turn: the template's pieces joined (parsed once, when the
        prompt was given), or ``str.format`` for a prompt with format specs."""
        if ask is None:
            ask = self._ask_for(state, names)
        history = _history_text(state.history, self.max_history)
        prompt, template = self._template
        if prompt is not self.prompt:  # set anew since: parse it again
            prompt, template = self._template = (self.prompt, _template(self.prompt))
        if template is None:
            return self.prompt.format(
                roles=ask.roles, history=history, participants=ask.participants
            )
        values = {"roles": ask.roles, "history": history, "participants": ask.participants}
        return "".join([piece if field is None else values[field] for piece, field in template])

    def _fall_back(self, state: ChatState, names: list[str]) -> str:
        fallback = self.fallback
        if fallback is None or fallback == NEXT_IN_ORDER:  # after the last speaker, in order
            order = list(state.participants)
            start = order.index(state.last_speaker) + 1 if state.last_speaker in order else 0
            rotated = order[start:] + order[:start]
            return next(n for n in rotated if n in names)
        if fallback == PREVIOUS_SPEAKER:
            last = state.last_speaker
            return last if last is not None and last in state.participants else names[0]
        name = fallback if isinstance(fallback, str) else fallback(state)
        if name not in state.participants:
            raise ConfigurationError(
                f"the selector's fallback picked {name!r}, which is not a participant; "
                f"participants are {list(state.participants)}"
            )
        return name


@dataclass(slots=True, frozen=True)
class _Ask:
    """A selector request's fixed parts for one candidate list (see `Selector._asks`)."""

    descriptions: Mapping[str, str]
    base: ChatOptions | None
    roles: str
    participants: str
    options: ChatOptions


_ASKS_KEPT = 64
"""How many candidate lists one selector keeps the fixed parts of (then it starts over)."""

_FIELDS = frozenset({"roles", "history", "participants"})


def _template(prompt: str) -> list[tuple[str, str | None]] | None:
    """The prompt as literal pieces and field names, for joining at every turn; None when
    it has a format spec, a conversion or a field of another name (``str.format`` then
    renders it, and says what is wrong)."""
    pieces: list[tuple[str, str | None]] = []
    try:
        parsed = list(string.Formatter().parse(prompt))
    except ValueError:
        return None
    for literal, name, spec, conversion in parsed:
        if literal:
            pieces.append((literal, None))
        if name is None:
            continue
        if name not in _FIELDS or spec or conversion:
            return None
        pieces.append(("", name))
    return pieces


_LINES_KEPT = 4096
"""How many messages' prompt lines the selectors keep (then they start over)."""
_lines: dict[int, tuple[Message, int, str | None]] = {}
"""A message's line in the selector prompt (None: it has no text or data), by the
message's id, with the message itself (which keeps the id from being reused) and its
number of contents (a message given more since is rendered again): a turn reads the same
last messages as the turn before it, so each is rendered once. Measured on a 4-agent
selector turn over 20 lines: 15.6 us a selection against 18.7 us rendering every line."""


def _history_text(history: Sequence[Message], count: int) -> str:
    """The last `count` messages with text or data, one line each, found from the end (a
    long history is not walked whole at every turn)."""
    lines: list[str] = []
    kept = _lines
    for m in reversed(history):
        if len(lines) >= count:
            break
        known = kept.get(id(m))
        if known is not None and known[0] is m and known[1] == len(m.contents):
            line = known[2]
        else:
            line = f"{m.author_name or m.role}: {m.text}" if _readable(m) else None
            if len(kept) >= _LINES_KEPT:
                kept.clear()
            kept[id(m)] = (m, len(m.contents), line)
        if line is not None:
            lines.append(line)
    lines.reverse()
    return "\n".join(lines) or "(empty)"


def _readable(message: Message) -> bool:
    """Whether `message` carries text or data (a plain loop: this runs for many messages
    at every selector turn)."""
    for c in message.contents:  # noqa: SIM110 (no generator per message)
        if type(c) is TextContent or type(c) is DataContent:
            return True
    return False


def _schema(names: list[str]) -> dict[str, Any]:
    return {
        "title": "next_speaker",
        "type": "object",
        "properties": {"speaker": {"type": "string", "enum": list(names)}},
        "required": ["speaker"],
    }


def _parse(text: str, value: Any, names: list[str]) -> str | None:
    """A candidate named by the answer: its structured value, JSON text, or plain text."""
    if value is None and text:
        try:
            value = json.loads(text)
        except ValueError:
            value = None
    if isinstance(value, dict):
        found = value.get("speaker")
        return found if found in names else None
    stripped = text.strip().strip("\"'.").strip()
    if stripped in names:
        return stripped
    # a name mentioned as a word of its own (as AutoGen's selector reads mentions), so
    # "nobody" does not name an agent called "b"
    mentioned = [n for n in names if re.search(rf"(?<!\w){re.escape(n)}(?!\w)", text)]
    return mentioned[0] if len(mentioned) == 1 else None
