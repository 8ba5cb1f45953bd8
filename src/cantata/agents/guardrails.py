"""Guardrails: checks on what enters and leaves a run, each answering pass, replace or trip.

A `Guardrail` wraps a check (a plain function, sync or async, of the text, or of the text
and a `GuardrailContext`; or an `Agent` that answers a `Verdict` as JSON) and says where it
applies: an agent's ``input`` (each incoming user message, before the model sees it),
its ``output`` (the final answer, before it is recorded or returned), a tool call's
``tool_arguments`` and ``tool_result``; a team's ``turn`` (each turn's message) and a
workflow executor's ``executor_input`` and ``executor_output``. The check returns a
`Verdict`: pass (also None or True), replace (also a str: the text to use instead, to
redact or rewrite) or tripwire (also False), which ends the run with `GuardrailTripwire`.

An input guardrail runs ``mode="blocking"`` (before the model call) or ``"parallel"``
(beside the first model call, which is cancelled the moment a tripwire fires; nothing the
model said is recorded, streamed or acted on before every parallel check passed). A
parallel check may pass or trip, not replace (the model has the input already); and its
input is in the thread when it trips (recorded as the model call began, with no answer),
where a blocking check's tripwire records nothing. Every check is an
OpenTelemetry span ``guardrail {name}`` with its verdict; the verdicts of a run are in
`AgentResponse.guardrails`, and a tripwire carries its `GuardrailResult`.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeAlias, overload

from ..core import (
    ConfigurationError,
    GuardrailTripwire,
    Message,
    ModelOutputError,
    TextContent,
    register,
    tracing,
)

if TYPE_CHECKING:
    from .response import AgentResponse


class _Judge(Protocol):
    """An agent as a check (what `Guardrail` needs of it: a name, `run` and threads)."""

    @property
    def name(self) -> str: ...

    def run(self, *args: Any, **kw: Any) -> Awaitable[AgentResponse]: ...

    def create_thread(self) -> Any: ...


__all__ = [
    "Guardrail",
    "GuardrailCheck",
    "GuardrailContext",
    "GuardrailResult",
    "GuardrailStage",
    "Verdict",
    "apply_guardrails",
    "check_guardrails",
    "input_guardrail",
    "output_guardrail",
    "replace_text",
    "tool_guardrail",
]

GuardrailStage: TypeAlias = Literal[
    "input",
    "output",
    "tool_arguments",
    "tool_result",
    "turn",
    "executor_input",
    "executor_output",
]
"""Where a guardrail applies (see the module docstring)."""

_STAGES: frozenset[str] = frozenset(
    (
        "input",
        "output",
        "tool_arguments",
        "tool_result",
        "turn",
        "executor_input",
        "executor_output",
    )
)
VERDICT_SCHEMA: dict[str, Any] = {
    "title": "verdict",
    "type": "object",
    "properties": {
        "verdict": {"type": "string", "enum": ["pass", "tripwire"]},
        "reason": {"type": "string", "maxLength": 160},
    },
    "required": ["verdict", "reason"],
    "additionalProperties": False,
}
"""The JSON schema an agent used as a guardrail answers with (constrained by a grammar on
the embedded model, by ``response_format`` on a server, so its verdict always parses)."""


@dataclass(frozen=True, slots=True)
class Verdict:
    """What a check decided: ``Verdict.passed()``, ``Verdict.replace(text)`` or
    ``Verdict.tripwire(reason)``."""

    kind: Literal["pass", "replace", "tripwire"]
    text: str | None = None
    """The replacement (``replace`` only)."""
    reason: str = ""

    @classmethod
    def passed(cls, reason: str = "") -> Verdict:
        """Let the text through unchanged."""
        return _PASS if not reason else cls("pass", reason=reason)

    @classmethod
    def replace(cls, text: str, reason: str = "") -> Verdict:
        """Go on with `text` instead (a redaction, a rewrite)."""
        if not isinstance(text, str):
            raise ConfigurationError(f"Verdict.replace needs a str, got {type(text).__name__}")
        return cls("replace", text=text, reason=reason)

    @classmethod
    def tripwire(cls, reason: str) -> Verdict:
        """Stop the run: `reason` reaches the caller in `GuardrailTripwire`."""
        return cls("tripwire", reason=str(reason))


_PASS = Verdict("pass")


@dataclass(frozen=True, slots=True, kw_only=True)
class GuardrailContext:
    """What a check may read besides the text: where it runs, for whom, and the message or
    tool call the text comes from."""

    stage: GuardrailStage
    owner: str
    """The agent's, team's or executor's name."""
    message: Message | None = None
    tool: str | None = None
    arguments: dict[str, Any] | None = None


@register(name="cantata.agents.GuardrailResult")
@dataclass(frozen=True, slots=True)
class GuardrailResult:
    """One check's outcome, as a run reports it (and a tripwire carries it)."""

    guardrail: str
    stage: str
    verdict: str
    reason: str = ""
    seconds: float = 0.0


GuardrailCheck: TypeAlias = Callable[..., Any]
"""``check(text)`` or ``check(text, context)``, sync or async, returning a `Verdict`, a
str (a replacement), a bool or None (pass)."""


class Guardrail:
    """A named check at one or more stages (see the module docstring).

    ``Guardrail(no_secrets, on="output")``, ``Guardrail(judge_agent, on="input",
    mode="parallel")``; the decorators `input_guardrail`, `output_guardrail` and
    `tool_guardrail` make one from a function."""

    __slots__ = ("_agent", "_check", "_sync", "_two_args", "mode", "name", "stages")

    def __init__(
        self,
        check: GuardrailCheck | _Judge,
        *,
        name: str | None = None,
        on: GuardrailStage | Iterable[GuardrailStage] = "input",
        mode: Literal["blocking", "parallel"] = "blocking",
    ) -> None:
        stages = frozenset((on,) if isinstance(on, str) else on)
        unknown = sorted(stages - _STAGES)
        if unknown or not stages:
            raise ConfigurationError(
                f"guardrail stage(s) {unknown or '(none)'} unknown; use some of {sorted(_STAGES)}"
            )
        if mode not in ("blocking", "parallel"):
            raise ConfigurationError(
                f"guardrail mode must be 'blocking' or 'parallel', not {mode!r}"
            )
        if mode == "parallel" and stages != {"input"}:
            raise ConfigurationError(
                "only an input guardrail runs in parallel with the model call; make it "
                "on='input' or mode='blocking'"
            )
        # an agent (anything with a name and an async run that is no function) judges
        judge = (
            not inspect.isroutine(check)
            and callable(getattr(check, "run", None))
            and callable(getattr(check, "create_thread", None))
            and isinstance(getattr(check, "name", None), str)
        )
        self._agent: _Judge | None = check if judge else None  # type: ignore[assignment]
        if self._agent is None and not callable(check):
            raise ConfigurationError(
                f"a guardrail checks with a function or an agent, got {type(check).__name__}"
            )
        self._check = check
        self._two_args = self._agent is None and _takes_context(check)  # type: ignore[arg-type]
        # a plain function: checked without a coroutine of its own (see `apply_guardrails`)
        self._sync = self._agent is None and not (
            inspect.iscoroutinefunction(check) or inspect.iscoroutinefunction(type(check).__call__)
        )
        found = self._agent.name if self._agent is not None else getattr(check, "__name__", None)
        self.name: str = str(name or found or "guardrail")
        """Named in spans, results and `GuardrailTripwire.guardrail` (and served error codes)."""
        if not self.name or not isinstance(self.name, str):
            raise ConfigurationError("a guardrail needs a name")
        self.stages: frozenset[str] = stages
        self.mode: Literal["blocking", "parallel"] = mode

    def __repr__(self) -> str:
        return f"Guardrail({self.name!r}, on={sorted(self.stages)}, mode={self.mode!r})"

    async def check(self, text: str, context: GuardrailContext) -> Verdict:
        """The check's verdict on `text` (its result normalized to a `Verdict`)."""
        if self._agent is not None:
            return await _ask_agent(self._agent, text, context)
        fn = self._check
        assert callable(fn)
        result = fn(text, context) if self._two_args else fn(text)
        if inspect.isawaitable(result):
            result = await result
        return _verdict(result, self.name)


def _takes_context(fn: Callable[..., Any]) -> bool:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    positional = [
        p
        for p in params
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty
    ]
    return len(positional) >= 2 or any(p.kind is p.VAR_POSITIONAL for p in params)


def _verdict(result: Any, name: str) -> Verdict:
    if result is None or result is True:
        return _PASS
    if result is False:
        return Verdict.tripwire(f"refused by {name}")
    if isinstance(result, Verdict):
        return result
    if isinstance(result, str):
        return Verdict.replace(result)
    raise ConfigurationError(
        f"guardrail {name!r} returned {type(result).__name__}; return a Verdict, a str "
        "(a replacement), a bool or None"
    )


async def _ask_agent(agent: _Judge, text: str, context: GuardrailContext) -> Verdict:
    """An agent as a check: it answers a `VERDICT_SCHEMA` object about `text`."""
    from ..models import ChatOptions

    prompt = f"Stage: {context.stage}. Text to judge:\n<<<\n{text}\n>>>"
    response = await agent.run(prompt, options=ChatOptions(response_format=VERDICT_SCHEMA))
    value = response.value
    if value is None:
        try:
            value = json.loads(response.text)
        except ValueError as exc:
            raise ModelOutputError(
                f"guardrail agent `{agent.name}` answered no verdict: {response.text[:200]!r}"
            ) from exc
    if not isinstance(value, dict) or value.get("verdict") not in ("pass", "tripwire"):
        raise ModelOutputError(f"guardrail agent `{agent.name}` answered no verdict: {value!r}")
    reason = str(value.get("reason", ""))
    return Verdict.passed(reason) if value["verdict"] == "pass" else Verdict.tripwire(reason)


def check_guardrails(guardrails: Iterable[Guardrail], *, owner: str) -> tuple[Guardrail, ...]:
    """`guardrails` as a tuple, each checked to be a `Guardrail` with a unique name."""
    out = tuple(guardrails)
    names: set[str] = set()
    for g in out:
        if not isinstance(g, Guardrail):
            raise ConfigurationError(
                f"`{owner}`: {g!r} is not a Guardrail; wrap the function: Guardrail(fn, on=...)"
            )
        if g.name in names:
            raise ConfigurationError(f"`{owner}`: two guardrails are named {g.name!r}")
        names.add(g.name)
    return out


@overload
def input_guardrail(fn: GuardrailCheck, /) -> Guardrail: ...
@overload
def input_guardrail(
    *, name: str | None = None, mode: Literal["blocking", "parallel"] = "blocking"
) -> Callable[[GuardrailCheck], Guardrail]: ...
def input_guardrail(
    fn: GuardrailCheck | None = None,
    /,
    *,
    name: str | None = None,
    mode: Literal["blocking", "parallel"] = "blocking",
) -> Guardrail | Callable[[GuardrailCheck], Guardrail]:
    """Make `fn` an input guardrail (``@input_guardrail`` or ``@input_guardrail(mode=...)``)."""

    def make(f: GuardrailCheck) -> Guardrail:
        return Guardrail(f, name=name, on="input", mode=mode)

    return make(fn) if fn is not None else make


@overload
def output_guardrail(fn: GuardrailCheck, /) -> Guardrail: ...
@overload
def output_guardrail(*, name: str | None = None) -> Callable[[GuardrailCheck], Guardrail]: ...
def output_guardrail(
    fn: GuardrailCheck | None = None, /, *, name: str | None = None
) -> Guardrail | Callable[[GuardrailCheck], Guardrail]:
    """Make `fn` an output guardrail (on the final answer)."""

    def make(f: GuardrailCheck) -> Guardrail:
        return Guardrail(f, name=name, on="output")

    return make(fn) if fn is not None else make


def tool_guardrail(
    fn: GuardrailCheck | None = None,
    /,
    *,
    name: str | None = None,
    on: Literal["arguments", "result", "both"] = "arguments",
) -> Any:
    """Make `fn` a guardrail on every tool call's arguments (as JSON text), its result, or
    both. On arguments, a replacement is what the model gets instead of running the tool;
    on a result, what the model gets instead of the result."""
    choices: dict[str, tuple[GuardrailStage, ...]] = {
        "arguments": ("tool_arguments",),
        "result": ("tool_result",),
        "both": ("tool_arguments", "tool_result"),
    }
    stages = choices[on]

    def make(f: GuardrailCheck) -> Guardrail:
        return Guardrail(f, name=name, on=stages)

    return make(fn) if fn is not None else make


@dataclass(slots=True)
class _Applied:
    text: str
    results: list[GuardrailResult] = field(default_factory=list)


async def apply_guardrails(
    guardrails: Sequence[Guardrail], text: str, context: GuardrailContext
) -> tuple[str, list[GuardrailResult]]:
    """Run `guardrails` in order on `text` (a replacement is what the next one sees):
    the text to go on with and each check's result. A tripwire raises `GuardrailTripwire`
    at once (the checks after it do not run)."""
    applied = _Applied(text)
    for guardrail in guardrails:
        await _one(guardrail, applied, context)  # one coroutine a check, none nested
    return applied.text, applied.results


async def _one(guardrail: Guardrail, applied: _Applied, context: GuardrailContext) -> None:
    start = time.perf_counter()
    if not tracing.enabled():
        if guardrail._sync:
            fn = guardrail._check
            result = fn(applied.text, context) if guardrail._two_args else fn(applied.text)  # type: ignore[operator]
            if inspect.isawaitable(result):  # a function that returned an awaitable after all
                result = await result
            verdict = _verdict(result, guardrail.name)
        else:
            verdict = await guardrail.check(applied.text, context)
        _apply(guardrail, verdict, applied, context, time.perf_counter() - start)
        return
    attributes = {
        "cantata.guardrail.name": guardrail.name,
        "cantata.guardrail.stage": context.stage,
        "cantata.guardrail.owner": context.owner,
    }
    with tracing.span(f"guardrail {guardrail.name}", attributes) as span:
        try:
            verdict = await guardrail.check(applied.text, context)
        except asyncio.CancelledError:
            span.set_attribute("cantata.guardrail.verdict", "cancelled")
            raise
        span.set_attribute("cantata.guardrail.verdict", verdict.kind)
        if verdict.reason:
            span.set_attribute("cantata.guardrail.reason", verdict.reason)
        _apply(guardrail, verdict, applied, context, time.perf_counter() - start)


def _apply(
    guardrail: Guardrail,
    verdict: Verdict,
    applied: _Applied,
    context: GuardrailContext,
    seconds: float,
) -> None:
    result = GuardrailResult(guardrail.name, context.stage, verdict.kind, verdict.reason, seconds)
    applied.results.append(result)
    if verdict.kind == "tripwire":
        raise tripwire(guardrail.name, context, verdict.reason, applied.results)
    if verdict.kind == "replace" and verdict.text is not None:
        applied.text = verdict.text


def tripwire(
    name: str, context: GuardrailContext, reason: str, results: list[GuardrailResult]
) -> GuardrailTripwire:
    """The error a tripwire raises, naming the guardrail, the owner and the reason."""
    where = f" on tool {context.tool!r}" if context.tool else ""
    return GuardrailTripwire(
        f"guardrail {name!r} stopped `{context.owner}` at its {context.stage}{where}: "
        f"{reason or 'no reason given'}",
        guardrail=name,
        reason=reason,
        stage=context.stage,
        owner=context.owner,
        results=list(results),
    )


def replace_text(message: Message, text: str) -> Message:
    """A copy of `message` whose text is `text` (its other contents and its id kept): what
    a replacement makes of a message."""
    others = [c for c in message.contents if type(c) is not TextContent]
    return message.copy(contents=[TextContent(text), *others])
