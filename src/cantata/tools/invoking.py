"""`FunctionInvokingChatClient`: the function-invocation loop as a `ChatClient`.

The model asks for tools, the tools run (concurrently when several), their results go
back as one tool message, and the model is asked again, until it answers in text, a
limit is reached, a tool needs a person's approval, or a middleware terminates the run.
Because it is itself a `ChatClient`, agents and workflows use it like any other client.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any

from ..core import CancellationToken, ConfigurationError, Message
from ..core.retry import RetryPolicy
from ..models import ChatClient, ChatOptions, ChatResponse, ChatResponseUpdate
from ._run import RECORDED, FunctionLoopRun, LimitName, LoopSettings, closing
from ._view import ViewMemo
from .middleware import ChatMiddleware, FunctionMiddleware
from .tool import FunctionTool, ToolMethod

__all__ = ["RECORDED", "FunctionInvokingChatClient", "LimitName", "OnMessage"]

OnMessage = Callable[[Message], Awaitable[None] | None]
"""Called with every message the loop produces, in order, as soon as it is complete; it may
return an awaitable (the loop awaits it), None, or `RECORDED` (done at once, awaiting it
does nothing)."""


class FunctionInvokingChatClient:
    """Wraps any `ChatClient` with the function-invocation loop.

    ``tools`` are offered on every request (more can be added per call with ``tools=``);
    ``middleware`` is a list of `ChatMiddleware` and `FunctionMiddleware`, first listed
    outermost. Limits: ``max_iterations`` model calls that asked for tools,
    ``max_function_calls`` tool calls in all, ``max_consecutive_errors`` turns in a row in
    which every call failed; at a limit the model is asked once more with
    ``tool_choice="none"`` (tool calls it makes anyway are dropped; when nothing else is
    left the answer is an empty assistant message) and the limit's name is recorded under
    ``"cantata.limit"`` in the last message's metadata.

    Finish reasons: the model's own (``"stop"``, ``"length"``...), ``"approval_required"``
    (the last message holds `FunctionApprovalRequestContent`s; answer with a user message
    of `FunctionApprovalResponseContent`s to resume), ``"terminated"`` (a middleware
    ended the run; tool calls of its last answer get an error result saying they did not
    run), ``"tool_calls"`` (the model called a tool the caller declared in
    ``options.tools`` without a function: the caller handles those calls; calls of the
    loop's own tools in the same answer ran, their results recorded before the caller's).
    A ``tool_choice`` of ``"required"`` or a tool name applies to the first request only.

    Retries: with a ``retry_policy`` (`cantata.core.retry.RetryPolicy`; a call's
    ``retry_policy=`` overrides it), a model call that fails with an error the policy
    retries (a timeout, a 429 or 5xx, a dropped connection by default) is made again after
    a jittered backoff (at least the server's ``Retry-After``, at most ``max_delay``), which
    the run's cancellation ends at once. Never after part of a streamed answer reached the
    caller: that failure is raised. Chat middleware sees one call; each attempt is a span
    of its own when tracing. Tools retry by their own ``retry_policy``. A tool that raises
    `cantata.core.retry.NeedsPerson` ends the run with that error (the model cannot resolve
    it); other tool failures are results the model reads.

    Security: approvals cannot change what runs. A `FunctionApprovalResponseContent` is
    honoured only when an assistant message before it holds the
    `FunctionApprovalRequestContent` with the same ``request_id`` (the loop issues those), and
    the call that runs is the request's: a response naming another tool or other arguments,
    or answering no request, runs nothing and gets an error result (or is ignored when
    there is no call to attach one to); a request answered twice runs once. The history
    before the answer is trusted as the loop's own output (keep it where clients cannot
    write, such as a thread).

    Cost per run does not grow with a long conversation: the client remembers the model's
    view of its last 64 conversations, so a run on one that extends one seen before (an
    agent's thread, turn after turn) converts only the new messages; change a message by
    making a new one, never its role or contents in place. Without chat middleware the
    wrapped client is handed the messages themselves (clients only read them); chat
    middleware gets copies (see `ChatContext`).

    A call in ``messages`` that never got a result (an approval request answered with a new
    message instead, a terminated run, a declared call the caller did not answer) is shown
    to the model with a "not run" error result: chat APIs refuse a request holding a call
    without its result. The caller's messages are not changed.
    """

    def __init__(
        self,
        client: ChatClient,
        *,
        tools: Sequence[FunctionTool] = (),
        middleware: Sequence[ChatMiddleware | FunctionMiddleware] = (),
        max_iterations: int = 10,
        max_function_calls: int | None = None,
        max_consecutive_errors: int | None = 3,
        concurrent_calls: bool = True,
        retry_policy: RetryPolicy | None = None,
    ) -> None:
        if not isinstance(client, ChatClient):
            raise ConfigurationError(
                f"FunctionInvokingChatClient needs a ChatClient to wrap, got {client!r}"
            )
        self._retry_policy = _check_retry_policy(retry_policy, "FunctionInvokingChatClient")
        _check_limit("max_iterations", max_iterations, allow_none=False)
        _check_limit("max_function_calls", max_function_calls, allow_none=True)
        _check_limit("max_consecutive_errors", max_consecutive_errors, allow_none=True)
        self._client = client
        self._tools = tuple(tools)
        # names must be valid and unique now, not at run time; runs without tools of their
        # own share this map (a run only reads it)
        self._tool_map = merge_tools(self._tools, ())
        self._chat_middleware: tuple[ChatMiddleware, ...] = ()
        self._function_middleware: tuple[FunctionMiddleware, ...] = ()
        self._split_middleware(middleware)
        self._settings = LoopSettings(
            max_iterations=max_iterations,
            max_function_calls=max_function_calls,
            max_consecutive_errors=max_consecutive_errors,
            concurrent_calls=concurrent_calls,
        )
        # what the model sees of recent conversations, so a long thread's turn converts
        # only its new messages
        self._views = ViewMemo()

    @property
    def max_iterations(self) -> int:
        """The model calls asking for tools that one request may make."""
        return self._settings.max_iterations

    @property
    def max_function_calls(self) -> int | None:
        """The tool calls one request may make in all (None: no limit)."""
        return self._settings.max_function_calls

    @property
    def max_consecutive_errors(self) -> int | None:
        """Failed tool rounds in a row before the loop gives up (None: no limit)."""
        return self._settings.max_consecutive_errors

    @property
    def concurrent_calls(self) -> bool:
        """Whether the tool calls of one model answer run concurrently."""
        return self._settings.concurrent_calls

    def _split_middleware(self, middleware: Sequence[ChatMiddleware | FunctionMiddleware]) -> None:
        self._chat_middleware, self._function_middleware = _split(middleware)

    @property
    def client(self) -> ChatClient:
        """The wrapped client."""
        return self._client

    @property
    def tools(self) -> tuple[FunctionTool, ...]:
        """The tools offered on every request (a call's ``tools=`` are added to them)."""
        return self._tools

    @property
    def retry_policy(self) -> RetryPolicy | None:
        """How a failed model call is tried again (None: it is not)."""
        return self._retry_policy

    @property
    def middleware(self) -> tuple[ChatMiddleware | FunctionMiddleware, ...]:
        """The chat middleware, then the function middleware, each outermost first."""
        return (*self._chat_middleware, *self._function_middleware)

    def _run(
        self,
        messages: Sequence[Message],
        options: ChatOptions | None,
        token: CancellationToken | None,
        tools: Sequence[FunctionTool] | None,
        on_message: OnMessage | None,
        tool_kwargs: Mapping[str, Any] | None,
        streaming: bool,
        retry_policy: RetryPolicy | None,
        run_middleware: Sequence[ChatMiddleware | FunctionMiddleware] = (),
    ) -> FunctionLoopRun:
        chat, function = self._chat_middleware, self._function_middleware
        if run_middleware:  # this request's own, outermost
            extra_chat, extra_function = _split(run_middleware)
            chat, function = (*extra_chat, *chat), (*extra_function, *function)
        return FunctionLoopRun(
            self._client,
            # the run only reads them (its view is a new list): a list is not copied
            messages if type(messages) is list else list(messages),
            views=self._views,
            tools=merge_tools(self._tools, tools) if tools else self._tool_map,
            chat_middleware=chat,
            function_middleware=function,
            settings=self._settings,
            options=options,
            token=token or CancellationToken(),
            on_message=on_message,
            tool_kwargs=tool_kwargs or {},
            streaming=streaming,
            retry_policy=(
                self._retry_policy
                if retry_policy is None
                else _check_retry_policy(retry_policy, "get_response")
            ),
        )

    async def get_response(
        self,
        messages: Sequence[Message],
        *,
        options: ChatOptions | None = None,
        cancellation_token: CancellationToken | None = None,
        tools: Sequence[FunctionTool] | None = None,
        on_message: OnMessage | None = None,
        tool_kwargs: Mapping[str, Any] | None = None,
        retry_policy: RetryPolicy | None = None,
        middleware: Sequence[ChatMiddleware | FunctionMiddleware] = (),
    ) -> ChatResponse:
        """Run the loop to its end; ``.messages`` holds every message it produced, in order.

        ``middleware`` wraps this request's model and tool calls only, outside the client's
        own (an agent's guardrails and usage limits for one run)."""
        run = self._run(
            messages,
            options,
            cancellation_token,
            tools,
            on_message,
            tool_kwargs,
            False,
            retry_policy,
            middleware,
        )
        await run.complete()
        return run.response()

    async def get_streaming_response(
        self,
        messages: Sequence[Message],
        *,
        options: ChatOptions | None = None,
        cancellation_token: CancellationToken | None = None,
        tools: Sequence[FunctionTool] | None = None,
        on_message: OnMessage | None = None,
        tool_kwargs: Mapping[str, Any] | None = None,
        retry_policy: RetryPolicy | None = None,
        middleware: Sequence[ChatMiddleware | FunctionMiddleware] = (),
    ) -> AsyncIterator[ChatResponseUpdate]:
        """Run the loop, streaming: text as it comes, tool calls and results whole, each with
        the id of its message, so `ChatResponse.from_updates` rebuilds the messages.
        Message metadata (such as ``"cantata.limit"``) does not travel in updates."""
        run = self._run(
            messages,
            options,
            cancellation_token,
            tools,
            on_message,
            tool_kwargs,
            True,
            retry_policy,
            middleware,
        )
        async with closing(run.steps()) as updates:
            async for update in updates:
                yield update


def _split(
    middleware: Sequence[ChatMiddleware | FunctionMiddleware],
) -> tuple[tuple[ChatMiddleware, ...], tuple[FunctionMiddleware, ...]]:
    chat: list[ChatMiddleware] = []
    function: list[FunctionMiddleware] = []
    for item in middleware:
        if isinstance(item, ChatMiddleware):
            chat.append(item)
        elif isinstance(item, FunctionMiddleware):
            function.append(item)
        else:
            raise ConfigurationError(
                f"{item!r} is not a ChatMiddleware or FunctionMiddleware; subclass one, "
                "or decorate an async function with @chat_middleware or @function_middleware"
            )
    return tuple(chat), tuple(function)


def merge_tools(
    base: Sequence[FunctionTool], extra: Sequence[FunctionTool]
) -> dict[str, FunctionTool]:
    """Tools by name; the same tool twice is fine, two tools with one name are not."""
    out: dict[str, FunctionTool] = {}
    for item in (*base, *extra):
        if not isinstance(item, FunctionTool):
            raise ConfigurationError(
                f"{item!r} is not a FunctionTool; decorate the function with @tool"
            )
        if isinstance(item, ToolMethod):
            raise ConfigurationError(
                f"tool {item.name!r} is a method read from its class, with no instance to "
                "run on; pass the instance (its tool methods are offered bound to it) or "
                "the tool read from it (instance.method)"
            )
        known = out.get(item.name)
        if known is not None and known is not item:
            raise ConfigurationError(
                f"two different tools are named {item.name!r}; give one another name "
                "with @tool(name=...)"
            )
        out[item.name] = item
    return out


def _check_retry_policy(policy: Any, owner: str) -> RetryPolicy | None:
    """`policy` when it is a `RetryPolicy` or None; a `ConfigurationError` otherwise."""
    if policy is not None and not isinstance(policy, RetryPolicy):
        raise ConfigurationError(
            f"{owner}: retry_policy must be a cantata.core.retry.RetryPolicy or None, got "
            f"{type(policy).__name__}"
        )
    return policy


def _check_limit(name: str, value: int | None, *, allow_none: bool) -> None:
    if value is None and allow_none:
        return
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        hint = " or None" if allow_none else ""
        raise ConfigurationError(f"{name} must be a positive int{hint}, got {value!r}")
