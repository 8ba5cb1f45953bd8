"""Guardrails on a workflow executor: its input (each message it handles) and its output
(what it sends, returns and yields), checked around each handler.

`WorkflowBuilder.with_guardrails` wraps the executor's handlers once, at build time: the
runner calls them as any others. The text checked is a value's own when it has some: a
str, a `Message` (its text), a list of messages, an object with a ``messages`` list (an
`AgentExecutorRequest`, an `AgentResponse`) or an `AgentExecutorResponse` (its agent's
answer); other values pass unchecked. Outputs are checked after the handler returns and
before anything it sent is delivered; its workflow outputs are held back from the event
stream until then, so a replacement is all a caller sees and a tripwire shows nothing. A
tripwire fails the executor's superstep with `GuardrailTripwire` (the run's
`WorkflowFailedEvent` carries it, naming the guardrail and the reason); the last
checkpoint stands, so a run resumes from it.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ..agents import AgentResponse, Guardrail, GuardrailContext, apply_guardrails, replace_text
from ..agents.guardrails import check_guardrails
from ..core import ConfigurationError, Message
from ._agent_messages import AgentExecutorResponse
from .events import OutputEvent

if TYPE_CHECKING:
    from .context import WorkflowContext
    from .executor import Executor

__all__ = ["guard_executor"]

_STAGES = frozenset(("executor_input", "executor_output"))


def guard_executor(executor: Executor, guardrails: Iterable[Guardrail]) -> None:
    """Wrap `executor`'s handlers with `guardrails` (stages ``executor_input`` and
    ``executor_output``)."""
    found = check_guardrails(guardrails, owner=executor.id)
    wrong = [g.name for g in found if not g.stages & _STAGES]
    if wrong:
        raise ConfigurationError(
            f"executor {executor.id!r}: guardrail(s) {wrong} are for no stage of an executor; "
            "make them Guardrail(check, on='executor_input') or on='executor_output'"
        )
    inputs = tuple(g for g in found if "executor_input" in g.stages)
    outputs = tuple(g for g in found if "executor_output" in g.stages)
    executor._handlers = tuple(_wrap(executor, h, inputs, outputs) for h in executor._handlers)
    executor._index()
    executor._synchronous = False  # a check may wait (a model's judgement)


def _wrap(
    executor: Executor, h: Any, inputs: tuple[Guardrail, ...], outputs: tuple[Guardrail, ...]
) -> Any:
    takes_ctx, is_async = h.takes_ctx, h.is_async
    owner = executor.id

    def call(message: Any, ctx: WorkflowContext[Any, Any]) -> Any:
        return executor._invoke(h, (message, ctx) if takes_ctx else (message,))

    async def guarded(*args: Any) -> Any:
        message, ctx = args[-2], args[-1]  # after the executor, when the handler is a method
        if inputs:
            message = await _checked(inputs, message, "executor_input", owner)
        if not outputs:
            returned = call(message, ctx)
            return await returned if is_async else returned
        result = ctx._result
        sent_before = len(result.sent) if isinstance(result.sent, list) else 0
        outputs_before = len(result.outputs) if isinstance(result.outputs, list) else 0
        sink = ctx._sink
        held: list[Any] = []
        ctx._sink = held.append
        try:
            returned = call(message, ctx)
            if is_async:
                returned = await returned
            if returned is not None:
                returned = await _checked(outputs, returned, "executor_output", owner)
            if isinstance(result.sent, list):
                for i in range(sent_before, len(result.sent)):
                    value, target = result.sent[i]
                    result.sent[i] = (
                        await _checked(outputs, value, "executor_output", owner),
                        target,
                    )
            replaced: dict[int, Any] = {}
            if isinstance(result.outputs, list):
                for i in range(outputs_before, len(result.outputs)):
                    value = result.outputs[i]
                    new = await _checked(outputs, value, "executor_output", owner)
                    if new is not value:
                        replaced[id(value)] = new
                        result.outputs[i] = new
        finally:
            ctx._sink = sink
        for event in held:  # the checks passed: the held events go out, replaced
            if type(event) is OutputEvent and id(event.data) in replaced:
                event = OutputEvent(event.executor_id, replaced[id(event.data)])
            sink(event)
        return returned

    return dataclasses.replace(h, fn=guarded, takes_ctx=True, is_async=True)


async def _checked(guardrails: tuple[Guardrail, ...], value: Any, stage: Any, owner: str) -> Any:
    """`value` through `guardrails`: the same object when nothing changed."""
    if isinstance(value, str):
        context = GuardrailContext(stage=stage, owner=owner)
        text, _ = await apply_guardrails(guardrails, value, context)
        return text
    if isinstance(value, Message):
        return await _message(guardrails, value, stage, owner)
    if isinstance(value, list) and value and all(isinstance(m, Message) for m in value):
        return await _messages(guardrails, value, stage, owner)
    if isinstance(value, AgentExecutorResponse):
        answer = value.agent_response
        messages = await _messages(guardrails, answer.messages, stage, owner)
        if messages is answer.messages:
            return value
        by_id = {m.message_id: m for m in messages}
        new_answer = copy.copy(answer)
        new_answer.messages = messages
        return dataclasses.replace(
            value,
            agent_response=new_answer,
            full_conversation=[by_id.get(m.message_id, m) for m in value.full_conversation],
        )
    found = getattr(value, "messages", None)
    if isinstance(found, list) and all(isinstance(m, Message) for m in found):
        messages = await _messages(guardrails, found, stage, owner)
        if messages is found:
            return value
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            return dataclasses.replace(value, messages=messages)
        if isinstance(value, AgentResponse):
            out = copy.copy(value)
            out.messages = messages
            return out
    return value


async def _message(
    guardrails: tuple[Guardrail, ...], message: Message, stage: Any, owner: str
) -> Message:
    if not message.text or message.role in ("system", "tool"):
        return message
    context = GuardrailContext(stage=stage, owner=owner, message=message)
    text, _ = await apply_guardrails(guardrails, message.text, context)
    return message if text == message.text else replace_text(message, text)


async def _messages(
    guardrails: tuple[Guardrail, ...], messages: list[Message], stage: Any, owner: str
) -> list[Message]:
    out = [await _message(guardrails, m, stage, owner) for m in messages]
    return messages if all(a is b for a, b in zip(out, messages, strict=True)) else out
