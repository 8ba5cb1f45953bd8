"""An agent's guardrails and usage limits, applied to one run at the points that exist.

`AgentGuard` is the agent's (immutable) part; each run gets a `RunGuard`: input checks
before the turn (a parallel one as a task the first model call races), and two middleware
for this run's loop only (`AgentRunContext.loop_middleware`): around each model call (the
limits before it, usage after it, the gate of the parallel checks, the output checks on a
final answer) and around each tool call (the tool-call limit, argument and result checks).
A stream holds back what must not reach the caller yet: everything while a parallel check
is pending, and a final answer's text until the output checks passed (a replacement then
streams instead of the original, and a tripwire drops it).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from ..core import (
    ConfigurationError,
    FunctionCallContent,
    FunctionResultContent,
    GuardrailTripwire,
    Message,
    TextContent,
    tracing,
)
from ..models import ChatResponse, parse_structured
from ..tools import (
    ChatContext,
    ChatMiddleware,
    ChatNext,
    FunctionInvocationContext,
    FunctionMiddleware,
    FunctionNext,
)
from .agent_middleware import AgentRunContext
from .guardrails import (
    Guardrail,
    GuardrailContext,
    GuardrailResult,
    GuardrailStage,
    apply_guardrails,
    replace_text,
)
from .recorder import Recorder
from .response import AgentResponse, AgentResponseStream, AgentResponseUpdate
from .usage import THREAD_USAGE_KEY, RunUsage, UsageLimits, UsageMeter

Turn = Callable[[Any, AgentRunContext, Recorder], Awaitable[AgentResponse]]
StreamTurn = Callable[[Any, AgentRunContext, Recorder], AgentResponseStream]


class AgentGuard:
    """An agent's guardrails by stage and its usage limits."""

    __slots__ = (
        "limits",
        "name",
        "on_input",
        "on_output",
        "on_tool_arguments",
        "on_tool_result",
        "parallel",
        "thread_limits",
    )

    def __init__(
        self, name: str, guardrails: tuple[Guardrail, ...], limits: tuple[UsageLimits, ...]
    ) -> None:
        self.name = name

        def at(stage: str, mode: str | None = None) -> tuple[Guardrail, ...]:
            return tuple(
                g for g in guardrails if stage in g.stages and (mode is None or g.mode == mode)
            )

        self.on_input = at("input", "blocking")
        self.parallel = at("input", "parallel")
        self.on_output = at("output")
        self.on_tool_arguments = at("tool_arguments")
        self.on_tool_result = at("tool_result")
        unused = [
            g.name
            for g in guardrails
            if not g.stages & {"input", "output", "tool_arguments", "tool_result"}
        ]
        if unused:
            raise ConfigurationError(
                f"agent `{name}`: guardrail(s) {unused} apply to no stage of an agent (a "
                "team's 'turn' or an executor's stages go on the team or the workflow)"
            )
        self.limits = limits
        self.thread_limits = any(limit.per == "thread" for limit in limits)

    def run(self, turn: Turn) -> Turn:
        """`turn` with this guard around it."""

        async def guarded(agent: Any, ctx: AgentRunContext, recorder: Recorder) -> AgentResponse:
            run = RunGuard(self)
            outer = ctx.loop_middleware
            ctx.loop_middleware = [*run.middleware, *outer]
            response: AgentResponse | None = None
            try:
                await run.begin(ctx)
                response = await turn(agent, ctx, recorder)
                return response
            finally:
                ctx.loop_middleware = outer
                await run.end(ctx, response)

        return guarded

    def stream(self, turn: StreamTurn) -> StreamTurn:
        """`turn` (streaming) with this guard around it."""

        def guarded(agent: Any, ctx: AgentRunContext, recorder: Recorder) -> AgentResponseStream:
            run = RunGuard(self)
            result: list[AgentResponse] = []

            async def updates() -> AsyncIterator[AgentResponseUpdate]:
                outer = ctx.loop_middleware
                ctx.loop_middleware = [*run.middleware, *outer]
                response: AgentResponse | None = None
                try:
                    await run.begin(ctx)
                    stream = turn(agent, ctx, recorder)
                    try:
                        async for update in run.held(stream):
                            yield update
                    finally:
                        await stream.aclose()
                    response = stream.response
                    result.append(response)
                finally:
                    ctx.loop_middleware = outer
                    await run.end(ctx, response)

            return AgentResponseStream(updates(), lambda: result[-1])

        return guarded


class RunGuard:
    """One run's checks, counters and the state of its parallel checks."""

    __slots__ = ("_gate", "guard", "meter", "middleware", "replaced", "results")

    def __init__(self, guard: AgentGuard) -> None:
        self.guard = guard
        self.results: list[GuardrailResult] = []
        self.replaced: dict[str | None, str] = {}  # final answers' new text, by message id
        self.meter: UsageMeter | None = None
        self._gate: asyncio.Future[list[GuardrailResult]] | None = None
        self.middleware: list[ChatMiddleware | FunctionMiddleware] = []
        if guard.limits or guard.parallel or guard.on_output:
            self.middleware.append(_ModelCalls(self))
        if guard.limits or guard.on_tool_arguments or guard.on_tool_result:
            self.middleware.append(_ToolCalls(self))

    # -- the run's edges ---------------------------------------------------------------

    async def begin(self, ctx: AgentRunContext) -> None:
        """Before the turn: the thread's usage (for per-thread limits), the blocking input
        checks (a replacement changes the input before anything records it), the parallel
        ones started."""
        guard = self.guard
        if guard.on_input:
            ctx.messages = [await self._check_input(m, guard.on_input) for m in ctx.messages]
        if guard.limits:
            before = None
            if guard.thread_limits and ctx.thread is not None:
                await ctx.thread.load_context_state()
                before = RunUsage.from_json(ctx.thread.context_state.get(THREAD_USAGE_KEY))
            self.meter = UsageMeter(guard.name, guard.limits, before=before)
        if guard.parallel:
            self._gate = asyncio.ensure_future(self._parallel(list(ctx.messages)))

    async def _check_input(self, message: Message, guardrails: tuple[Guardrail, ...]) -> Message:
        if message.role != "user":
            return message
        text = message.text
        context = GuardrailContext(stage="input", owner=self.guard.name, message=message)
        new, _ = await self._evaluate(guardrails, text, context)
        return message if new == text else replace_text(message, new)

    async def _parallel(self, messages: list[Message]) -> list[GuardrailResult]:
        results: list[GuardrailResult] = []
        for message in messages:
            if message.role != "user":
                continue
            context = GuardrailContext(stage="input", owner=self.guard.name, message=message)
            text = message.text
            new, found = await apply_guardrails(self.guard.parallel, text, context)
            results.extend(found)
            if new != text:
                raise ConfigurationError(
                    f"agent `{self.guard.name}`: a parallel input guardrail replaced the "
                    "input, which the model has already; make it mode='blocking'"
                )
        return results

    async def _evaluate(
        self, guardrails: tuple[Guardrail, ...], text: str, context: GuardrailContext
    ) -> tuple[str, list[GuardrailResult]]:
        try:
            new, results = await apply_guardrails(guardrails, text, context)
        except GuardrailTripwire as exc:
            self.results.extend(exc.fields.get("results", ()))
            raise
        self.results.extend(results)
        return new, results

    async def end(self, ctx: AgentRunContext, response: AgentResponse | None) -> None:
        """After the turn, however it ended: a parallel check still running is stopped,
        the verdicts and usage go on the response, the span and the thread."""
        gate = self._gate
        if gate is not None and not gate.done():
            gate.cancel()
            await asyncio.gather(gate, return_exceptions=True)
        meter = self.meter
        usage = meter.finish() if meter is not None else None
        if response is not None:
            response.guardrails = [*response.guardrails, *self.results]
            if usage is not None:
                response.run_usage = usage
        if usage is not None:
            _usage_on_span(usage)
            thread = ctx.thread
            if self.guard.thread_limits and thread is not None:
                state = thread.context_state
                total = RunUsage.from_json(state.get(THREAD_USAGE_KEY))
                total.add(usage)
                state[THREAD_USAGE_KEY] = total.to_json()
                await thread.save_context_state()

    # -- the parallel checks ---------------------------------------------------------

    @property
    def settled(self) -> bool:
        """Whether no parallel check is pending (any that ran passed, or raised)."""
        gate = self._gate
        return gate is None or gate.done()

    def _settle(self) -> None:
        gate = self._gate
        if gate is None:
            return
        try:
            self.results.extend(gate.result())
        except GuardrailTripwire as exc:
            self.results.extend(exc.fields.get("results", ()))
            raise
        finally:
            self._gate = None

    async def model_call(self, call_next: ChatNext) -> None:
        """The first model call, raced against the parallel checks: a tripwire cancels it
        at once; its answer goes on only once every check passed."""
        gate = self._gate
        if gate is None:
            await call_next()
            return
        model = asyncio.ensure_future(call_next())
        try:
            await asyncio.wait((model, gate), return_when=asyncio.FIRST_COMPLETED)
            if gate.done():
                self._settle()  # raises on a tripwire: the model call is cancelled below
            await model
            pending = self._gate
            if pending is not None:
                await asyncio.wait((pending,))
                self._settle()
        finally:
            if not model.done():
                model.cancel()
                await asyncio.gather(model, return_exceptions=True)

    # -- the answer --------------------------------------------------------------------

    async def check_output(self, context: ChatContext) -> None:
        """A final answer (no tool calls) through the output checks."""
        response = context.response
        if response is None or response.function_calls or not self.guard.on_output:
            return
        messages: list[Message] = []
        changed = False
        for message in response.messages:
            if message.role != "assistant":
                messages.append(message)
                continue
            text = message.text
            check = GuardrailContext(stage="output", owner=self.guard.name, message=message)
            new, _ = await self._evaluate(self.guard.on_output, text, check)
            if new != text:
                message = replace_text(message, new)
                self.replaced[message.message_id] = new
                changed = True
            messages.append(message)
        if changed:
            fmt = context.options.response_format
            value = parse_structured(messages[-1].text, fmt) if fmt is not None else None
            context.response = dataclasses.replace(response, messages=messages, value=value)

    async def held(self, stream: AgentResponseStream) -> AsyncIterator[AgentResponseUpdate]:
        """`stream`'s updates, each once it may reach the caller."""
        hold_output = bool(self.guard.on_output)
        if not hold_output and self._gate is None:
            async for update in stream:
                yield update
            return
        held: list[AgentResponseUpdate] = []
        async for update in stream:
            tool_traffic = any(
                type(c) is FunctionCallContent or type(c) is FunctionResultContent
                for c in update.contents
            )
            if (hold_output and not tool_traffic) or not self.settled:
                held.append(update)
                continue
            for early in held:
                yield early
            held.clear()
            yield update
        # the stream ended: the output checks ran (a tripwire raised above)
        sent: set[str | None] = set()
        for update in held:
            replacement = self.replaced.get(update.message_id)
            if replacement is None or not any(type(c) is TextContent for c in update.contents):
                yield update
                continue
            if update.message_id not in sent:
                sent.add(update.message_id)
                yield dataclasses.replace(update, contents=[TextContent(replacement)])
            kept = [c for c in update.contents if type(c) is not TextContent]
            if kept:
                yield dataclasses.replace(update, contents=kept)


class _ModelCalls(ChatMiddleware):
    """Around each model call of the run: limits, the parallel gate, usage, output. It only
    reads the request (an output replacement is a new response), so the loop hands it the
    request itself, not copies."""

    __slots__ = ("_run",)
    reads_only = True

    def __init__(self, run: RunGuard) -> None:
        self._run = run

    async def process(self, context: ChatContext, call_next: ChatNext) -> None:
        run = self._run
        meter = run.meter
        if meter is not None:
            meter.check_model_call()
        await run.model_call(call_next)
        response = context.response
        if meter is not None and response is not None:
            meter.count(_model_name(context, response), response.usage)
        if run.guard.on_output:
            await run.check_output(context)


class _ToolCalls(FunctionMiddleware):
    """Around each tool call of the run: the tool-call limit, the argument and result checks.
    A replacement of the arguments is the result the model gets instead of the tool's."""

    __slots__ = ("_run",)

    def __init__(self, run: RunGuard) -> None:
        self._run = run

    async def process(self, context: FunctionInvocationContext, call_next: FunctionNext) -> None:
        run = self._run
        guard = run.guard
        if run.meter is not None:
            run.meter.check_tool_call()
        if guard.on_tool_arguments:
            text = json.dumps(context.arguments, ensure_ascii=False, sort_keys=True)
            new = await self._check("tool_arguments", guard.on_tool_arguments, text, context)
            if new != text:
                context.result = new  # the tool does not run
                return
        await call_next()
        if guard.on_tool_result and context.error is None:
            result = context.result
            text = result if isinstance(result, str) else _json_text(result)
            new = await self._check("tool_result", guard.on_tool_result, text, context)
            if new != text:
                context.result = new

    async def _check(
        self,
        stage: GuardrailStage,
        guardrails: tuple[Guardrail, ...],
        text: str,
        context: FunctionInvocationContext,
    ) -> str:
        check = GuardrailContext(
            stage=stage,
            owner=self._run.guard.name,
            tool=context.function.name,
            arguments=context.arguments,
        )
        new, _ = await self._run._evaluate(guardrails, text, check)
        return new


def _json_text(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    except (TypeError, ValueError):
        return str(value)


def _model_name(context: ChatContext, response: ChatResponse) -> str:
    return str(
        response.model
        or context.options.model
        or getattr(context.client, "model", None)
        or type(context.client).__name__
    )


def _usage_on_span(usage: RunUsage) -> None:
    if not tracing.enabled():
        return
    span = tracing.current_span()
    if span is None:
        return
    span.set_attribute("cantata.usage.model_calls", usage.model_calls)
    span.set_attribute("cantata.usage.tool_calls", usage.tool_calls)
    span.set_attribute("cantata.usage.cost", usage.cost)
    for model, u in usage.by_model.items():
        span.set_attribute(f"cantata.usage.model.{model}.input_tokens", u.input_tokens)
        span.set_attribute(f"cantata.usage.model.{model}.output_tokens", u.output_tokens)
