"""Guardrails on a team's turns: each turn's message is checked before it joins the
team's history. A tripwire stops the run cleanly, with a `StopMessage` whose source is
``"guardrail:<name>"`` and whose text says why, in the run's `TaskResult` (the refused
message is not in its transcript). A turn guardrail passes or trips, it does not replace:
participants on local threads share the speaker's thread, where its words are already;
to redact what an agent says, give the agent an output guardrail, which runs before its
answer is recorded anywhere."""

from __future__ import annotations

from collections.abc import Iterable

from ..agents import Guardrail, GuardrailContext, apply_guardrails
from ..agents.guardrails import check_guardrails
from ..core import ConfigurationError, GuardrailTripwire
from .result import StopMessage
from .turns import TurnDone

__all__ = ["check_turn", "turn_guardrails"]


def turn_guardrails(guardrails: Iterable[Guardrail], *, team: str) -> tuple[Guardrail, ...]:
    """A team's guardrails, each one for the ``"turn"`` stage."""
    found = check_guardrails(guardrails, owner=team)
    wrong = [g.name for g in found if "turn" not in g.stages]
    if wrong:
        raise ConfigurationError(
            f"team {team!r}: guardrail(s) {wrong} are not for turns; make them "
            "Guardrail(check, on='turn') (an agent's own guardrails go on the agent)"
        )
    return found


async def check_turn(guardrails: tuple[Guardrail, ...], done: TurnDone) -> TurnDone | StopMessage:
    """`done` once its messages passed, or why the run stops."""
    for message in done.messages:
        if message.role != "assistant" or not message.text:
            continue
        context = GuardrailContext(stage="turn", owner=done.speaker, message=message)
        try:
            text, _ = await apply_guardrails(guardrails, message.text, context)
        except GuardrailTripwire as exc:
            return StopMessage(
                f"guardrail {exc.guardrail!r} stopped the run at {done.speaker}'s turn: "
                f"{exc.reason or 'no reason given'}",
                f"guardrail:{exc.guardrail}",
            )
        if text != message.text:
            raise ConfigurationError(
                f"a turn guardrail replaced {done.speaker}'s message; at a team's turn a "
                "guardrail passes or trips (put a redacting guardrail on the agent, "
                "on='output', so its answer is redacted before anyone sees it)"
            )
    return done
