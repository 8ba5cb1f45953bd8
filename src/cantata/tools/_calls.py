"""Running the tool calls of one model turn: lookup, argument parsing, approval, middleware.

A failing call becomes an error result the model reads, except a `NeedsPerson` failure:
only a person can resolve it, so it ends the loop and reaches the caller (in a workflow, the
agent executor's run stops with a request for input, and the answer runs it again); and a
`RunStopped` (a guardrail's tripwire, a usage limit), which ends the run on purpose.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..core import (
    ApprovalRequired,
    CancellationToken,
    CancelledError,
    DataContent,
    FunctionCallContent,
    FunctionResultContent,
    InvalidMessageError,
    RunStopped,
    tracing,
)
from ..core.durable import EffectScope, current_effects
from ..core.retry import NeedsPerson
from ._depth import TOO_DEEP_TEXT, TOOL_JSON_DEPTH, too_deep
from ._results import error_text, jsonable, split_attachments, unknown_tool_text
from .context import ToolContext
from .middleware import FunctionInvocationContext, FunctionMiddleware, compose
from .tool import FunctionTool

_log = logging.getLogger("cantata.tools")


@dataclass(slots=True)
class CallOutcome:
    """What became of one call: a result, or a request for approval (`result` is None)."""

    call: FunctionCallContent
    result: FunctionResultContent | None
    terminate: bool = False
    attachments: tuple[DataContent, ...] = ()
    """Data the tool returned for the model to see (images): they follow the results."""

    @property
    def needs_approval(self) -> bool:
        return self.result is None

    @property
    def failed(self) -> bool:
        return self.result is not None and self.result.is_error


def error_outcome(call: FunctionCallContent, text: str) -> CallOutcome:
    return CallOutcome(call, FunctionResultContent(call.call_id, error=text))


class CallRunner:
    """Runs calls for one run of the loop; never raises for a failing call, only for
    cancellation (which must reach the caller) and for `NeedsPerson`."""

    def __init__(
        self,
        tools: Mapping[str, FunctionTool],
        middleware: Sequence[FunctionMiddleware],
        *,
        kwargs: Mapping[str, object],
        token: CancellationToken,
        concurrent: bool,
        dropped: set[str] | None = None,
    ) -> None:
        self._dropped = dropped if dropped is not None else set()
        self._tools = tools
        # None without middleware: a bound method of this runner kept on it would be a
        # reference cycle, left for the garbage collector (see `FunctionLoopRun`)
        self._chain = compose(middleware, self._invoke) if middleware else None
        self._kwargs = kwargs
        self._token = token
        self._concurrent = concurrent

    async def run_turn(
        self, calls: Sequence[FunctionCallContent], *, approved: bool = False
    ) -> list[CallOutcome]:
        """Outcomes in the order of `calls`; concurrent when configured, else one by one."""
        self._token.raise_if_cancelled()
        if self._concurrent:
            return await self._gather([self._start(c, approved) for c in calls])
        outcomes: list[CallOutcome] = []
        for call in calls:
            outcomes.extend(await self._gather([self._start(call, approved)]))
        return outcomes

    def _start(self, call: FunctionCallContent, approved: bool) -> asyncio.Future[CallOutcome]:
        return self._token.link_future(asyncio.ensure_future(self._run_one(call, approved)))

    async def _gather(self, tasks: list[asyncio.Future[CallOutcome]]) -> list[CallOutcome]:
        try:
            return list(await asyncio.gather(*tasks))
        except asyncio.CancelledError:
            await _cancel_all(tasks)
            current = asyncio.current_task()
            if self._token.is_cancelled and (current is None or not current.cancelling()):
                raise CancelledError(
                    "the tool calls were cancelled through the run's CancellationToken"
                ) from None
            raise
        except BaseException:
            await _cancel_all(tasks)
            raise

    async def _run_one(self, call: FunctionCallContent, approved: bool) -> CallOutcome:
        try:
            return await self._run_checked(call, approved)
        except (CancelledError, NeedsPerson, RunStopped):
            raise
        except Exception as exc:  # e.g. arguments nested too deep to parse: still a result
            _log.debug("call %r to tool %r failed", call.call_id, call.name, exc_info=exc)
            return error_outcome(call, error_text(exc, call.name))

    async def _run_checked(self, call: FunctionCallContent, approved: bool) -> CallOutcome:
        tool = self._tools.get(call.name)
        if tool is None:
            return error_outcome(call, unknown_tool_text(call.name, list(self._tools)))
        if call.call_id in self._dropped:
            return error_outcome(call, TOO_DEEP_TEXT)
        try:
            parsed = call.parse_arguments()
        except InvalidMessageError as exc:
            return error_outcome(call, f"{exc}; send the arguments as one JSON object")
        if too_deep(parsed):
            return error_outcome(call, TOO_DEEP_TEXT)
        arguments = _copy_json(parsed)
        if tool.requires_approval and not approved:
            return CallOutcome(call, None)
        context = FunctionInvocationContext(
            function=tool,
            call=call,
            arguments=arguments,
            kwargs=self._kwargs,
            cancellation_token=self._token,
            approved=approved,
        )
        try:
            chain = self._chain
            await (self._invoke(context) if chain is None else chain(context))
        except CancelledError:
            raise
        except Exception as exc:  # a middleware failed: the model is told, the run goes on
            context.error = exc
        return self._outcome(context)

    def _outcome(self, context: FunctionInvocationContext) -> CallOutcome:
        call, error = context.call, context.error
        if isinstance(error, (NeedsPerson, RunStopped)):
            raise error  # a person must answer, or a check stopped the run: not a result
        if isinstance(error, ApprovalRequired):
            if not context.approved:
                return CallOutcome(call, None, context.terminate)
            error = ApprovalRequired(
                f"tool {call.name!r} asked for approval again after it was approved: {error}"
            )
        attached: tuple[DataContent, ...] = ()
        if error is not None:
            _log.debug("tool %r failed", call.name, exc_info=error)
            result = FunctionResultContent(call.call_id, error=error_text(error, call.name))
        else:
            returned, attached = split_attachments(context.result)
            value = jsonable(returned)
            if too_deep(value):  # it could not be stored with the conversation
                _log.debug("tool %r returned a value nested too deep", call.name)
                result = FunctionResultContent(call.call_id, error=_too_deep_result(call.name))
                attached = ()
            else:
                result = FunctionResultContent(call.call_id, value)
        return CallOutcome(call, result, context.terminate, attached)

    async def _invoke(self, context: FunctionInvocationContext) -> None:
        tool_context = ToolContext(
            kwargs=context.kwargs,
            call_id=context.call.call_id,
            tool_name=context.function.name,
            cancellation_token=context.cancellation_token or self._token,
            approved=context.approved,
        )
        if tracing.enabled():
            attributes = {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": context.function.name,
                "gen_ai.tool.call.id": context.call.call_id,
            }
            with tracing.span(f"execute_tool {context.function.name}", attributes):
                await self._invoke_tool(context, tool_context)
                return
        await self._invoke_tool(context, tool_context)

    async def _invoke_tool(
        self, context: FunctionInvocationContext, tool_context: ToolContext
    ) -> None:
        try:
            scope = current_effects() if context.function.effect else None
            if scope is None:
                context.result = await context.function.invoke(
                    context.arguments, context=tool_context
                )
            else:
                context.result = await _journaled(scope, context, tool_context)
            context.error = None
        except CancelledError:
            raise
        except Exception as exc:
            context.error = exc


def _too_deep_result(tool_name: str) -> str:
    return (
        f"tool {tool_name!r} returned a value nested deeper than {TOOL_JSON_DEPTH} levels, "
        "which cannot be kept in the conversation; it was dropped"
    )


def _copy_json(value: Any) -> Any:
    """A copy of parsed JSON arguments: middleware and tools may change what they are given
    without changing the call recorded in the conversation (and stored by the caller)."""
    if isinstance(value, dict):
        return {k: _copy_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy_json(v) for v in value]
    return value


async def _cancel_all(tasks: Sequence[asyncio.Future[CallOutcome]]) -> None:
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def _journaled(
    scope: EffectScope, context: FunctionInvocationContext, tool_context: ToolContext
) -> Any:
    """An effect tool's call inside a durable run: its result by call id from the journal,
    or the call, journaled before the loop goes on."""
    key = scope.next_key(f"tool:{context.call.call_id}")
    found, value = await scope.lookup(key)
    if found:
        return value
    keyed = dataclasses.replace(tool_context, idempotency_key=key)  # one key for all attempts
    result = await context.function.invoke(context.arguments, context=keyed)
    return await scope.record(key, jsonable(result))
