"""An LLM judge: a model reads the case, the answer and a rubric, and gives a verdict.

The verdict is asked for as structured output (`JudgeVerdict`, a JSON schema), so a client
that constrains its output to a schema answers with a verdict that always parses: the
embedded local model decodes through a JSON-schema grammar, and OpenAI-compatible servers
take it as a response format. The reason is bounded in length, so the grammar closes the
object well within the answer's token budget. A verdict that still does not parse (a server
that ignores response formats) fails the case with the text it got, never crashes the eval.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError

from ..core import CantataError, ConfigurationError, Message, ModelOutputError
from ..models import ChatClient, ChatOptions
from .context import EvalContext, EvalResult
from .evaluators import BuiltinEvaluator

__all__ = ["Judge", "JudgeVerdict"]

_MAX_REASON = 160

_SYSTEM = (
    "You grade an AI assistant's answer against a rubric. Read the rubric, the user's "
    "input and the answer, then decide: passed is true only if the answer meets the rubric. "
    "Give a one-sentence reason."
)


class JudgeVerdict(BaseModel):
    """What the judge answers: whether the answer meets the rubric, and why (briefly)."""

    model_config = ConfigDict(extra="forbid")

    passed: bool
    reason: str = Field(max_length=_MAX_REASON)


class Judge(BuiltinEvaluator):
    """The answer meets `rubric`, as a model judges it.

    The model is `client` when given (``Judge("is polite", client=...)``), else the eval's
    ``judge_client``. With `include_input` and `include_expected` the judge also reads the
    case's input and expected output.
    """

    kind: ClassVar[str] = "judge"
    primary: ClassVar[str | None] = "rubric"
    rubric: str = Field(min_length=1, max_length=4000)
    include_input: bool = True
    include_expected: bool = True
    max_tokens: int = Field(default=200, ge=32, le=4096)
    _client: ChatClient | None = PrivateAttr(default=None)

    def __init__(
        self, rubric: str | None = None, /, *, client: ChatClient | None = None, **data: Any
    ) -> None:
        if rubric is not None:
            data["rubric"] = rubric
        super().__init__(**data)
        self._client = client

    @property
    def client(self) -> ChatClient | None:
        """The model this judge asks, when it was given one of its own."""
        return self._client

    def prompt(self, ctx: EvalContext) -> list[Message]:
        """The messages the judge model is sent."""
        parts = [f"Rubric: {self.rubric}"]
        if self.include_input:
            parts.append(f"Input: {_text(ctx.case.input)}")
        if self.include_expected and ctx.expected is not None:
            parts.append(f"Expected: {_text(ctx.expected)}")
        parts.append(f"Answer: {ctx.output}")
        parts.append("Does the answer meet the rubric?")
        return [Message("system", _SYSTEM), Message("user", "\n".join(parts))]

    async def evaluate(self, ctx: EvalContext) -> EvalResult:
        """Ask the model and read its verdict."""
        client = self._client or ctx.judge_client
        if client is None:
            raise ConfigurationError(
                "the judge has no model: pass judge_client= to evaluate(), or "
                "Judge(rubric, client=...)"
            )
        options = ChatOptions(temperature=0.0, max_tokens=self.max_tokens,
                              response_format=JudgeVerdict)  # fmt: skip
        try:
            response = await client.get_response(self.prompt(ctx), options=options)
        except ModelOutputError as exc:
            return EvalResult(self.name, False, 0.0, f"the judge's verdict did not parse: {exc}")
        except CantataError as exc:
            return EvalResult(self.name, False, 0.0, f"the judge model failed: {exc}")
        verdict = response.value
        if not isinstance(verdict, JudgeVerdict):
            try:
                verdict = JudgeVerdict.model_validate_json(response.text)
            except ValidationError:
                return EvalResult(
                    self.name, False, 0.0, f"the judge's verdict did not parse: {response.text!r}"
                )
        return EvalResult(self.name, verdict.passed, 1.0 if verdict.passed else 0.0,
                          verdict.reason)  # fmt: skip


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
