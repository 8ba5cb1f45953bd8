"""One run of the function loop; state lives here, never on the (shared) client."""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Generator, Mapping, Sequence
from dataclasses import dataclass
from types import CoroutineType
from typing import Any, Generic, Literal, TypeAlias, TypeVar

from ..core import (
    CancellationToken,
    FunctionApprovalRequestContent,
    FunctionCallContent,
    Message,
    Usage,
    UsageContent,
    UsageError,
    new_id,
    tracing,
)
from ..core.durable import current_effects
from ..core.retry import RetryPolicy
from ..models import ChatClient, ChatOptions, ChatResponse, ChatResponseUpdate
from ._approvals import insert_results, missing_call_message, pending_approvals
from ._calls import CallOutcome, CallRunner, error_outcome
from ._depth import bound_calls
from ._request_messages import RequestMessages, request_list
from ._results import REJECTED_TEXT
from ._view import ViewMemo
from .middleware import ChatContext, ChatMiddleware, FunctionMiddleware, compose
from .tool import FunctionTool

LIMIT_KEY = "cantata.limit"
TERMINATED_TEXT = "not run: a middleware ended the run before this call ran"

LimitName: TypeAlias = Literal["max_iterations", "max_function_calls", "max_consecutive_errors"]
"""The value stored under ``"cantata.limit"`` in the last message's metadata."""
_FORCED_CHOICES = (None, "auto", "none")
_STREAM_AHEAD = 16  # model updates a stream holds for a reader that is behind
_NO_PENDING: frozenset[str] = frozenset()


class _Recorded:
    """What an ``on_message`` callback may return when it did its work at once: the loop
    goes on without awaiting anything (awaiting it anyway is fine: it is done already)."""

    __slots__ = ()

    def __await__(self) -> Generator[Any, None, None]:
        return self  # type: ignore[return-value]  # an iterator that ends at once

    def __iter__(self) -> _Recorded:
        return self

    def __next__(self) -> Any:
        raise StopIteration

    def send(self, value: Any) -> Any:
        """Ends at once (what ``await`` asks of an iterator)."""
        raise StopIteration

    def throw(self, *args: Any) -> Any:
        """Nothing to pass an exception into: it is raised here."""
        raise args[0] if len(args) == 1 else args[1]

    def __repr__(self) -> str:
        return "RECORDED"


RECORDED = _Recorded()
"""Returned by an ``on_message`` callback that recorded the message at once."""


@dataclass(slots=True, frozen=True, kw_only=True)
class LoopSettings:
    max_iterations: int
    max_function_calls: int | None
    max_consecutive_errors: int | None
    concurrent_calls: bool


class FunctionLoopRun:
    """Drives one request through the loop: `complete()` with whole model answers, or
    `steps()` streaming them; `response()` is the whole result once either has ended.
    Both run the same steps (`_resume`, `_model_context`, `_answered`); only the model call
    differs, as ``streaming`` (given at construction) says."""

    def __init__(
        self,
        client: ChatClient,
        messages: list[Message],
        *,
        views: ViewMemo,
        tools: dict[str, FunctionTool],
        chat_middleware: Sequence[ChatMiddleware],
        function_middleware: Sequence[FunctionMiddleware],
        settings: LoopSettings,
        options: ChatOptions | None,
        token: CancellationToken,
        on_message: Callable[[Message], Awaitable[None] | None] | None,
        tool_kwargs: Mapping[str, Any],
        streaming: bool,
        retry_policy: RetryPolicy | None = None,
    ) -> None:
        self._client = client
        self._retry_policy = retry_policy
        self._sent = 0  # updates of model streams handed to the caller, for retries
        self._tools = tools
        # approval answers come only in a trailing user message (the check inlined: hot)
        self._approvals = (
            pending_approvals(messages) if messages and messages[-1].role == "user" else []
        )
        self._conversation = views.view(
            messages,
            {v.call.call_id for v in self._approvals} if self._approvals else _NO_PENDING,
        )
        self._settings = settings
        self._token = token
        self._on_message = on_message
        self._kwargs = tool_kwargs
        self._streaming = streaming
        # The chain around `_call_inner`, or None when there is no middleware: a bound method
        # of this run kept on it would make a reference cycle, and then the run, its
        # recorder and everything the turn made would wait for the garbage collector
        # instead of going when the turn's last reference does (a team's instant turns ran
        # 4 to 7% slower for that).
        self._chat_chain = compose(chat_middleware, self._call_inner) if chat_middleware else None
        # Middleware gets copies it may change (see ChatContext): of the options, and of the
        # messages it reads (RequestMessages); without any, the model client (which only
        # reads) gets the messages and options themselves: copying every message of a long
        # thread for every model call made a turn's cost grow with the thread.
        # (a middleware that says it only reads, as an agent's guardrails and limits do,
        # needs no copies)
        self._copy_request = any(not getattr(m, "reads_only", False) for m in chat_middleware)
        self._dropped: set[str] = set()  # ids of calls whose arguments nested too deep
        self._function_middleware = function_middleware
        self._calls: CallRunner | None = None  # made when a turn calls tools
        self._options, self._declared_only = _base_options(options, tools)
        self._produced: list[Message] = []
        self._usage: Usage | None = None
        self._last: ChatResponse | None = None
        self._finish: str | None = None
        self._iterations = 0
        self._function_calls = 0
        self._consecutive_errors = 0
        self._chat_terminated = False
        self._limit: LimitName | None = None  # reached: the next model call is the last
        self._sink: Callable[[ChatResponseUpdate], None] | None = None
        self._room: asyncio.Event | None = None  # set while the stream's reader keeps up

    # -- result --------------------------------------------------------------------

    def response(self) -> ChatResponse:
        last = self._last
        return ChatResponse(
            list(self._produced),
            usage=self._usage,
            finish_reason=self._finish,
            model=last.model if last else None,
            response_id=last.response_id if last else None,
            value=last.value if last is not None and self._finish not in _NO_VALUE else None,
        )

    # -- the loop --------------------------------------------------------------------

    async def complete(self) -> None:
        """Run the loop to its end, each model answer whole (`get_response`)."""
        if self._approvals:
            await self._resume()
        on_message = self._on_message
        while self._finish is None:
            limit = self._limit
            context = self._model_context(limit)
            await self._chat(context)
            if limit is not None:
                await self._answered(context, limit)
                continue
            # what _answered, _turn and _emit_all do for an answer without tool calls,
            # inline: three coroutines fewer on every turn
            response = self._take_response(context, drop_calls=False)
            if response.function_calls or self._chat_terminated:
                await self._turn()
                continue
            for message in response.messages:
                self._produced.append(message)
                if on_message is not None:
                    outcome = on_message(message)
                    if outcome is not RECORDED and (
                        type(outcome) is CoroutineType
                        or (outcome is not None and inspect.isawaitable(outcome))
                    ):
                        await outcome
            self._finish = response.finish_reason or "stop"

    async def steps(self) -> AsyncIterator[ChatResponseUpdate]:
        """Run the loop streaming (`get_streaming_response`): model calls stream live; what
        a turn makes after its model call (tool results, approval requests) is recorded
        first and then yielded whole. The same steps as `complete`; only the model call
        differs (it streams, through `_stream_chain`)."""
        if self._approvals:
            for update in await self._resume():
                yield update
        while self._finish is None:
            limit = self._limit
            context = self._model_context(limit)
            async with closing(self._stream_chain(context, limit is not None)) as updates:
                async for update in updates:
                    yield update
            for update in await self._answered(context, limit):
                yield update
        last = self._produced[-1].message_id if self._produced else None
        yield ChatResponseUpdate(
            [],
            message_id=last,
            finish_reason=self._finish,
            model=self._last.model if self._last else None,
            response_id=self._last.response_id if self._last else None,
        )

    async def _answered(
        self, context: ChatContext, limit: LimitName | None
    ) -> list[ChatResponseUpdate]:
        """After a model call: take its answer and go on with it."""
        self._take_response(context, drop_calls=limit is not None)
        return await (self._turn() if limit is None else self._limit_answer(limit))

    async def _turn(self) -> list[ChatResponseUpdate]:
        """After a model call: record its answer, run the calls it made."""
        response = self._require_last()
        await self._emit_all(response.messages)
        calls = response.function_calls
        if self._chat_terminated:
            # Nothing of this answer runs; its calls get results that say so, since a call
            # left without one makes every later request of a stored conversation fail.
            not_run = [error_outcome(call, TERMINATED_TEXT) for call in calls]
            updates = await self._deliver(not_run)
            self._finish = "terminated"
            return updates
        if not calls:
            self._finish = response.finish_reason or "stop"
            return []
        if any(call.name in self._declared_only for call in calls):
            # the caller runs the tools it declared without a function; ours run here, so
            # the caller gets back only the calls that are its own to answer
            own = [call for call in calls if call.name not in self._declared_only]
            updates = []
            if own:
                self._iterations += 1
                updates = await self._deliver(await self._run_within_budget(own))
            if self._finish is None:
                self._finish = "tool_calls"
            return updates
        self._iterations += 1
        outcomes = await self._run_within_budget(calls)
        updates = await self._deliver(outcomes)
        if self._finish is None:
            self._after_calls(outcomes)
        return updates

    async def _resume(self) -> list[ChatResponseUpdate]:
        """Run the calls a person approved, as their requests asked for them; rejected ones,
        and answers that did not match their request, get an error result."""
        approved = [v.call for v in self._approvals if v.approved and v.error is None]
        ran = await self._runner().run_turn(approved, approved=True)
        outcomes = {o.call.call_id: o for o in ran}
        ordered = [
            outcomes.get(v.call.call_id) or error_outcome(v.call, v.error or REJECTED_TEXT)
            for v in self._approvals
        ]
        self._function_calls += len(approved)
        missing = missing_call_message(self._conversation, [v.call for v in self._approvals])
        if missing is not None:
            self._conversation.append(missing)
        updates = await self._deliver(ordered)
        if self._finish is None:
            self._after_calls(ordered, count_iterations=False)
        return updates

    def _runner(self) -> CallRunner:
        if self._calls is None:
            self._calls = CallRunner(
                self._tools,
                self._function_middleware,
                kwargs=self._kwargs,
                token=self._token,
                concurrent=self._settings.concurrent_calls,
                dropped=self._dropped,
            )
        return self._calls

    async def _run_within_budget(self, calls: list[FunctionCallContent]) -> list[CallOutcome]:
        """Run the calls the budget allows, in order; the rest get an error result. A call
        to a tool that needs approval takes no budget: it will not run in this turn."""
        limit = self._settings.max_function_calls
        budget = len(calls) if limit is None else max(0, limit - self._function_calls)
        allowed: list[FunctionCallContent] = []
        over: set[int] = set()
        for index, call in enumerate(calls):
            tool = self._tools.get(call.name)
            if tool is not None and tool.requires_approval:
                allowed.append(call)
            elif budget > 0:
                allowed.append(call)
                budget -= 1
            else:
                over.add(index)
        ran = iter(await self._runner().run_turn(allowed))
        outcomes = [
            error_outcome(call, f"not run: this run reached its limit of {limit} function calls")
            if index in over
            else next(ran)
            for index, call in enumerate(calls)
        ]
        self._function_calls += sum(
            1 for i, o in enumerate(outcomes) if i not in over and not o.needs_approval
        )
        return outcomes

    async def _deliver(self, outcomes: list[CallOutcome]) -> list[ChatResponseUpdate]:
        """Record the tool message with the results, then the approval request, if any;
        returns their updates."""
        updates: list[ChatResponseUpdate] = []
        results = [o.result for o in outcomes if o.result is not None]
        if results:
            attached = [d for o in outcomes for d in o.attachments]
            message = Message("tool", [*results, *attached])
            insert_results(self._conversation, message)
            updates.extend(_updates_of(message))
            await self._emit(message)
        waiting = [o.call for o in outcomes if o.needs_approval]
        if waiting:
            request = Message(
                "assistant", [FunctionApprovalRequestContent(c.call_id, c) for c in waiting]
            )
            updates.extend(_updates_of(request))
            await self._emit(request)
            self._finish = "approval_required"
        elif any(o.terminate for o in outcomes):
            self._finish = "terminated"
        return updates

    def _after_calls(self, outcomes: list[CallOutcome], *, count_iterations: bool = True) -> None:
        """Count the turn's errors; at a limit, the next model call is the last one."""
        results = [o for o in outcomes if o.result is not None]
        if results and all(o.failed for o in results):
            self._consecutive_errors += 1
        elif results:
            self._consecutive_errors = 0
        self._limit = self._limit_reached(count_iterations)

    async def _limit_answer(self, limit: LimitName) -> list[ChatResponseUpdate]:
        """After the last model call, made at a limit: record its answer, marked."""
        updates: list[ChatResponseUpdate] = []
        messages = self._require_last().messages
        if not messages:
            # The model made only tool calls (ignoring tool_choice="none") and they were
            # dropped; an empty answer still tells the caller the run stopped at a limit.
            empty = Message("assistant", "")
            self._conversation.append(empty)
            messages = [empty]
            updates.extend(_updates_of(empty))
        messages[-1].metadata[LIMIT_KEY] = limit
        await self._emit_all(messages)
        response = self._require_last()
        self._finish = "terminated" if self._chat_terminated else response.finish_reason or "stop"
        return updates

    def _limit_reached(self, count_iterations: bool) -> LimitName | None:
        s = self._settings
        if s.max_function_calls is not None and self._function_calls >= s.max_function_calls:
            return "max_function_calls"
        if (
            s.max_consecutive_errors is not None
            and self._consecutive_errors >= s.max_consecutive_errors
        ):
            return "max_consecutive_errors"
        if count_iterations and self._iterations >= s.max_iterations:
            return "max_iterations"
        return None

    # -- model calls ---------------------------------------------------------------

    def _request_options(self) -> ChatOptions:
        options = self._options
        if (self._iterations or self._approvals) and options.tool_choice not in _FORCED_CHOICES:
            # "required" or one named tool, kept after the first turn, would never let the
            # model answer in text.
            options = dataclasses.replace(options, tool_choice="auto")
        return options

    def _model_context(self, limit: LimitName | None) -> ChatContext:
        """The next model call; at a limit, one that may not call tools."""
        self._token.raise_if_cancelled()
        options = self._options  # `_request_options`, inline
        if (self._iterations or self._approvals) and options.tool_choice not in _FORCED_CHOICES:
            options = self._request_options()
        if limit is not None and options.tools:
            options = dataclasses.replace(options, tool_choice="none")
        return ChatContext(
            client=self._client,
            messages=(
                RequestMessages(self._conversation)
                if self._copy_request
                else list(self._conversation)
            ),
            options=_own_options(options) if self._copy_request else options,
            is_streaming=self._streaming,
            kwargs=self._kwargs,
            cancellation_token=self._token,
        )

    def _take_response(self, context: ChatContext, *, drop_calls: bool) -> ChatResponse:
        """Take the model's answer into the conversation; returns it (as kept)."""
        response = bound_calls(_require_response(context), self._dropped)
        if drop_calls:
            response = _without_calls(response)
        if response.usage is not None:
            self._usage = response.usage if self._usage is None else self._usage + response.usage
        self._conversation.extend(response.messages)
        self._chat_terminated = context.terminate
        self._last = response
        return response

    def _chat(self, context: ChatContext) -> Awaitable[None]:
        """The model call through the chat middleware, if any (a plain function: no
        coroutine of its own)."""
        chain = self._chat_chain
        return self._call_inner(context) if chain is None else chain(context)

    async def _call_inner(self, context: ChatContext) -> None:
        scope = current_effects()
        if scope is None:
            policy = self._retry_policy
            if (policy is None or policy.attempts == 1) and not tracing.enabled():
                # what _retried, _call_model and _ask_model come to here, three coroutines
                # fewer a turn
                if context.is_streaming:
                    await self._ask_model(context)
                    return
                context.response = await context.client.get_response(
                    request_list(context.messages),
                    options=context.options,
                    cancellation_token=context.cancellation_token,
                )
                return
            await self._retried(context)
            return
        # inside a durable run: the answer comes from the journal when it was journaled
        # (no second cost, no divergence), else it is journaled before the loop goes on
        key = scope.next_key("model")
        found, journaled = await scope.lookup(key)
        if found:
            context.response = journaled
            if context.is_streaming and self._sink is not None:
                for message in journaled.messages:
                    for update in _updates_of(message):
                        self._sink(update)
            return
        await self._retried(context)
        context.response = await scope.record(key, _require_response(context))

    async def _retried(self, context: ChatContext) -> None:
        """The model call, tried again by the retry policy on a failure it retries, but
        never once part of its stream reached the caller (who cannot take it back)."""
        policy = self._retry_policy
        if policy is None or policy.attempts == 1:
            await self._call_model(context)
            return
        sent = self._sent

        def nothing_sent(exc: BaseException) -> bool:
            return self._sent == sent

        await policy.call(
            lambda: self._call_model(context),
            what=f"model call to {_client_name(context.client)}",
            token=context.cancellation_token,
            retry_if=nothing_sent,
        )

    async def _call_model(self, context: ChatContext) -> None:
        if not tracing.enabled():
            await self._ask_model(context)
            return
        model = context.options.model or getattr(context.client, "model", None)
        attributes = {"gen_ai.operation.name": "chat", "gen_ai.request.model": model}
        with tracing.span(f"chat {model or ''}".strip(), attributes) as span:
            await self._ask_model(context)
            response = context.response
            if response is not None:
                usage = response.usage
                span.set_attribute("gen_ai.response.model", response.model or model or "")
                if usage is not None:
                    span.set_attribute("gen_ai.usage.input_tokens", usage.input_tokens or 0)
                    span.set_attribute("gen_ai.usage.output_tokens", usage.output_tokens or 0)

    async def _ask_model(self, context: ChatContext) -> None:
        messages = request_list(context.messages)
        if not context.is_streaming:
            context.response = await context.client.get_response(
                messages,
                options=context.options,
                cancellation_token=context.cancellation_token,
            )
            return
        sink = self._sink
        fallback_id = new_id()
        updates: list[ChatResponseUpdate] = []
        stream = context.client.get_streaming_response(
            messages, options=context.options, cancellation_token=context.cancellation_token
        )
        async with closing(stream) as chunks:
            async for update in chunks:
                if update.message_id is None:
                    update = dataclasses.replace(update, message_id=fallback_id)
                updates.append(update)
                if sink is not None:
                    self._sent += 1
                    sink(update)
                    room = self._room
                    if room is not None and not room.is_set():
                        await room.wait()  # the reader is behind: the model waits for it
        # parsed here as every client's get_response does, so middleware sees the value
        # (and a misfit fails) the same way streamed or not
        context.response = ChatResponse.from_updates(
            updates, response_format=context.options.response_format
        )

    async def _stream_chain(
        self, context: ChatContext, drop_calls: bool
    ) -> AsyncIterator[ChatResponseUpdate]:
        """Run the middleware chain in a task; the model's updates reach the caller live.

        Messages of the final response that did not stream (a middleware answered without
        the model, or replaced the model's answer) stream whole afterwards, so the stream
        always carries the messages the loop goes on with."""
        queue: asyncio.Queue[ChatResponseUpdate | None] = asyncio.Queue()
        streamed = False
        streamed_ids: set[str | None] = set()

        def sink(update: ChatResponseUpdate) -> None:
            nonlocal streamed
            streamed = True
            if drop_calls:
                kept = [c for c in update.contents if type(c) is not FunctionCallContent]
                if not kept and update.contents:
                    return
                finish = "stop" if update.finish_reason == "tool_calls" else update.finish_reason
                update = dataclasses.replace(update, contents=kept, finish_reason=finish)
            if any(type(c) is not UsageContent for c in update.contents):
                streamed_ids.add(update.message_id)
            queue.put_nowait(update)
            if queue.qsize() >= _STREAM_AHEAD:
                room.clear()

        room = asyncio.Event()
        room.set()
        self._sink, self._room = sink, room

        async def drive() -> None:
            try:
                await self._chat(context)
            finally:
                queue.put_nowait(None)

        task = asyncio.ensure_future(drive())
        try:
            while (update := await queue.get()) is not None:
                if queue.qsize() < _STREAM_AHEAD:
                    room.set()
                yield update
            await task
        finally:
            if not task.done():  # the caller stopped early or was cancelled
                task.cancel()
                try:
                    await task
                except asyncio.CancelledError:
                    # the task's own cancellation is expected; ours (the caller cancelled
                    # while the model stream was closing) must go on
                    if _cancelling():
                        raise
        self._sink = self._room = None
        response = _require_response(context)
        for message in _without_calls(response).messages if drop_calls else response.messages:
            if message.message_id not in streamed_ids:
                for update in _updates_of(message):
                    yield update
        if not streamed and response.usage is not None:  # a middleware answered alone
            yield ChatResponseUpdate([UsageContent(response.usage)])

    # -- helpers -------------------------------------------------------------------

    def _require_last(self) -> ChatResponse:
        if self._last is None:  # pragma: no cover - _call_model always sets it
            raise UsageError("no model response recorded")
        return self._last

    async def _emit_all(self, messages: Sequence[Message]) -> None:
        # what _emit does, inline: one coroutine less for every model answer
        on_message = self._on_message
        for message in messages:
            self._produced.append(message)
            if on_message is not None:
                outcome = on_message(message)
                if outcome is not RECORDED and (
                    type(outcome) is CoroutineType
                    or (outcome is not None and inspect.isawaitable(outcome))
                ):
                    await outcome

    async def _emit(self, message: Message) -> None:
        self._produced.append(message)
        if self._on_message is not None:
            outcome = self._on_message(message)
            if outcome is not RECORDED and (
                type(outcome) is CoroutineType  # the usual callback: one type check
                or (outcome is not None and inspect.isawaitable(outcome))
            ):
                await outcome


_NO_VALUE = frozenset({"approval_required", "terminated", "tool_calls"})


def _base_options(
    options: ChatOptions | None, tools: dict[str, FunctionTool]
) -> tuple[ChatOptions, frozenset[str]]:
    """The request options with our tools' specs first, then specs the caller declared;
    the caller's options themselves when there is nothing to add (they are only read)."""
    base = options or ChatOptions()
    if not tools and base.tools is None:
        return base, frozenset()
    declared = [spec for spec in base.tools or () if spec.name not in tools]
    specs = [t.spec for t in tools.values()] + declared
    merged = dataclasses.replace(base, tools=specs or None)
    return merged, frozenset(spec.name for spec in declared)


T = TypeVar("T")


class closing(Generic[T]):  # lower case, like contextlib's closers
    """Close `stream` when the block ends, however it ends.

    ``async for`` never closes what it iterates: when a caller stops reading the loop's
    stream early, each nested generator would be left to the event loop to finalize
    later, in another task (or never, if the loop shuts down first). Closing every level
    here stops the model stream and cancels running work in the caller's own task, before
    ``aclose()`` returns, so a cancellation of the caller reaches it too. A plain class,
    not ``@asynccontextmanager``: it wraps every level of every run, and a generator-based
    manager cost more than the level it closed.
    """

    __slots__ = ("_stream",)

    def __init__(self, stream: AsyncIterator[T]) -> None:
        self._stream = stream

    async def __aenter__(self) -> AsyncIterator[T]:
        return self._stream

    async def __aexit__(self, *exc_info: object) -> None:
        close = getattr(self._stream, "aclose", None)
        if close is not None:
            await close()


def _client_name(client: ChatClient) -> str:
    model = getattr(client, "model", None)
    return f"{type(client).__name__}({model!r})" if model else type(client).__name__


def _cancelling() -> bool:
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def _own_options(options: ChatOptions) -> ChatOptions:
    """Options one model call may change freely: a chat middleware that sets a field or
    adds to ``extra`` changes that call, not the next turns nor the caller's options."""
    return dataclasses.replace(
        options,
        stop=list(options.stop) if options.stop is not None else None,
        tools=list(options.tools) if options.tools is not None else None,
        extra=dict(options.extra),
    )


def _require_response(context: ChatContext) -> ChatResponse:
    if context.response is None:
        raise UsageError(
            "a chat middleware neither called call_next nor set context.response; "
            "set context.response to answer without the model"
        )
    return context.response


def _without_calls(response: ChatResponse) -> ChatResponse:
    """The response without tool calls: the model was told not to make any, and calls left
    without results would make the conversation invalid for the next request."""
    if not response.function_calls:
        return response
    messages = []
    for message in response.messages:
        kept = [c for c in message.contents if type(c) is not FunctionCallContent]
        if kept:
            messages.append(message.copy(contents=kept))
    finish = "stop" if response.finish_reason == "tool_calls" else response.finish_reason
    return dataclasses.replace(response, messages=messages, finish_reason=finish)


def _updates_of(message: Message) -> list[ChatResponseUpdate]:
    return [
        ChatResponseUpdate(
            [content],
            role=message.role,
            message_id=message.message_id,
            author_name=message.author_name,
        )
        for content in message.contents
    ]
