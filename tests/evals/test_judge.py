"""The LLM judge: its prompt and verdicts on a scripted model (a verdict that does not
parse fails the case, never the eval), and on the embedded model, whose verdicts always
parse because they are decoded through the verdict's JSON-schema grammar."""

from __future__ import annotations

import pytest

from cantata.core import Message, ModelError
from cantata.evals import Case, EvalContext, Judge, JudgeVerdict, RunOutcome, evaluate
from cantata.models import ChatClient, ChatOptions, ScriptedChatClient


def ctx(output: str, expected: str | None = "Paris") -> EvalContext:
    return EvalContext(Case("c", "Capital of France?", expected), RunOutcome(output=output))


async def test_the_judge_asks_for_a_verdict_with_the_rubric_input_and_answer() -> None:
    model = ScriptedChatClient(['{"passed": true, "reason": "It names Paris."}'])
    judge = Judge("names the capital", client=model)
    verdict = await judge.evaluate(ctx("Paris it is"))
    assert (verdict.evaluator, verdict.passed, verdict.score) == ("judge", True, 1.0)
    assert verdict.reason == "It names Paris."
    (call,) = model.calls
    assert call.options.response_format is JudgeVerdict and call.options.temperature == 0
    asked = call.messages[-1].text
    for part in ("Rubric: names the capital", "Input: Capital of France?", "Expected: Paris",
                 "Answer: Paris it is"):  # fmt: skip
        assert part in asked
    quiet = Judge("names the capital", include_input=False, include_expected=False)
    assert "Input:" not in quiet.prompt(ctx("x"))[-1].text


async def test_a_verdict_that_does_not_parse_or_a_failing_model_fails_the_case() -> None:
    def failing(messages: list[Message], options: ChatOptions) -> str:
        raise ModelError("server down")

    bad = await Judge("x", client=ScriptedChatClient(["sure, looks fine"])).evaluate(ctx("a"))
    assert not bad.passed and bad.reason.startswith("the judge's verdict did not parse")
    down = await Judge("x", client=ScriptedChatClient(failing)).evaluate(ctx("a"))
    assert not down.passed and "server down" in down.reason


async def test_the_eval_gives_its_judge_client_to_judges_without_one() -> None:
    model = ScriptedChatClient(['{"passed": false, "reason": "wrong city"}'])
    report = await evaluate(lambda v: "Lyon", [Case("c", "q")], evaluators=[Judge("is Paris")],
                            judge_client=model)  # fmt: skip
    assert report.results[0].failures == ["judge: wrong city"]


@pytest.fixture(scope="module")
def local_client() -> ChatClient:
    from cantata.models import LocalChatClient

    return LocalChatClient()


@pytest.mark.local_model
async def test_verdicts_of_the_embedded_model_always_parse(local_client: ChatClient) -> None:
    judge = Judge("The answer names the capital of France correctly.", client=local_client)
    outputs = ["The capital of France is Paris.", "It is Madrid."]
    cases = [Case(f"c{n}", "Capital of France?", "Paris") for n in range(2)]
    report = await evaluate(lambda q: outputs.pop(0), cases, evaluators=[judge], concurrency=1)
    assert report.runs == 2 and not outputs
    for result in report.results:
        (verdict,) = result.scores
        assert "did not parse" not in verdict.reason, verdict
        assert "judge model failed" not in verdict.reason, verdict
        assert verdict.reason.strip() and verdict.score == (1.0 if verdict.passed else 0.0)
