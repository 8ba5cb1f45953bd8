"""A scripted magentic manager model: answers each ledger request by its format's name."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from cantata.core import Message
from cantata.models import ChatOptions, ScriptedChatClient


def progress(
    speaker: str,
    instruction: str = "go on",
    *,
    satisfied: bool = False,
    loop: bool = False,
    progressing: bool = True,
) -> str:
    """A progress ledger as the model would write it."""

    def judged(answer: Any) -> dict[str, Any]:
        return {"reason": f"because {answer}", "answer": answer}

    return json.dumps(
        {
            "is_request_satisfied": judged(satisfied),
            "is_in_loop": judged(loop),
            "is_progress_being_made": judged(progressing),
            "next_speaker": judged(speaker),
            "instruction_or_question": judged(instruction),
        }
    )


class ManagerScript:
    """Plays progress ledgers in order; facts, plans and final answers on demand."""

    def __init__(
        self,
        ledgers: Iterable[str],
        *,
        plan: list[tuple[str, str]] | None = None,
        facts: str | None = None,
        final: str = "the final answer",
    ) -> None:
        self.ledgers = list(ledgers)
        self.plan = plan or [("a", "step one")]
        self.facts = facts
        self.final = final
        self.asked: list[str] = []
        self.prompts: list[str] = []
        self.client = ScriptedChatClient(self.answer)

    def answer(self, messages: list[Message], options: ChatOptions) -> str:
        fmt = options.response_format
        name = getattr(fmt, "__name__", "")
        self.asked.append(name)
        self.prompts.append(messages[-1].text)
        if name == "_Facts":
            return self.facts if self.facts is not None else json.dumps({"facts": ["f1"]})
        if name == "PlanOut":
            steps = [{"agent": a, "action": act} for a, act in self.plan]
            return json.dumps({"steps": steps})
        if name == "ProgressLedgerOut":
            if not self.ledgers:
                raise AssertionError("the script ran out of progress ledgers")
            return self.ledgers.pop(0)
        if name == "_Final":
            return json.dumps({"answer": self.final})
        raise AssertionError(f"unexpected request format {name!r}")
