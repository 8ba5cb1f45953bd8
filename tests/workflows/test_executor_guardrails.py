"""Guardrails on workflow executors: input and output, replacement and tripwire, the
held output events, and a resume from the last checkpoint after a tripwire."""

from __future__ import annotations

import pytest

from cantata.agents import Guardrail, Verdict
from cantata.core import ConfigurationError, GuardrailTripwire
from cantata.workflows import (
    Executor,
    InMemoryCheckpointStore,
    OutputEvent,
    WorkflowBuilder,
    WorkflowContext,
    WorkflowFailedEvent,
    executor,
)


def _executors() -> tuple[Executor, Executor]:
    """Fresh executors for each workflow (guardrails wrap an executor's handlers)."""

    @executor(id="upper")
    async def upper(text: str, ctx: WorkflowContext[str]) -> None:
        ctx.send_message(text.upper())

    @executor(id="emit")
    async def emit(text: str, ctx: WorkflowContext[str, str]) -> None:
        ctx.yield_output(f"out: {text}")

    return upper, emit


def _redact(text: str) -> str:
    return text.replace("SECRET", "[x]").replace("secret", "[x]")


def _refuse_bomb(text: str) -> Verdict:
    return Verdict.tripwire("mentions a bomb") if "bomb" in text.lower() else Verdict.passed()


def _flow(*guards: Guardrail, at: str = "upper") -> WorkflowBuilder:
    upper, emit = _executors()
    builder = WorkflowBuilder(upper).add_edge(upper, emit)
    return builder.with_guardrails(list(guards), [upper if at == "upper" else emit])


async def test_input_and_output_replacements() -> None:
    flow = _flow(Guardrail(_redact, on="executor_output")).build()
    result = await flow.run("my secret")
    assert result.outputs == ["out: MY [x]"]
    flow = _flow(Guardrail(_redact, on="executor_input"), at="emit").build()
    assert (await flow.run("a secret")).outputs == ["out: A [x]"]


async def test_a_streamed_output_event_shows_only_the_replacement() -> None:
    flow = _flow(Guardrail(_redact, on="executor_output"), at="emit").build()
    events = [e async for e in flow.run_stream("secret")]
    outputs = [e.data for e in events if isinstance(e, OutputEvent)]
    assert outputs == ["out: [x]"]


async def test_a_tripwire_fails_the_run_with_the_typed_error_and_resumes() -> None:
    store = InMemoryCheckpointStore()
    flow = _flow(Guardrail(_refuse_bomb, name="bomb", on="executor_input"), at="emit").build()
    events = []
    with pytest.raises(GuardrailTripwire) as caught:
        async for event in flow.run_stream("a bomb", checkpoint_store=store):
            events.append(event)
    assert caught.value.guardrail == "bomb" and caught.value.stage == "executor_input"
    failed = [e for e in events if isinstance(e, WorkflowFailedEvent)]
    assert len(failed) == 1 and failed[0].executor_id == "emit"
    assert not any(isinstance(e, OutputEvent) for e in events)
    # the checkpoint before the refused step stands: a resume meets the same check
    checkpoints = await store.list_checkpoints()
    assert checkpoints
    with pytest.raises(GuardrailTripwire):
        await flow.resume(checkpoints[-1].checkpoint_id, checkpoint_store=store)


def test_a_guardrail_for_no_executor_stage_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="executor"):
        upper, _ = _executors()
        WorkflowBuilder(upper).with_guardrails([Guardrail(str.lower)], [upper])
