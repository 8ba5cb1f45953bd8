"""`ScriptedChatClient`: a deterministic, instant model for tests (ours and users').

It answers from a list of scripted turns, or from a function of the messages, records
every call, and streams by chunks. It is public API on purpose: an agent system is only
testable if its model can be replaced by something that behaves exactly as told. The async
context-manager methods are written out as in every client (see `local.py`).
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self, TypeAlias

from ..core import (
    CancellationToken,
    ConfigurationError,
    Content,
    FunctionCallContent,
    Message,
    ModelError,
    TextContent,
    Usage,
    UsageContent,
    new_id,
)
from .types import ChatOptions, ChatResponse, ChatResponseUpdate, parse_structured

if TYPE_CHECKING:
    from .cassette import Interaction

__all__ = ["ScriptedCall", "ScriptedChatClient", "ScriptedTurn", "tool_call"]

ScriptedTurn: TypeAlias = str | Content | list[Content] | Message | ChatResponse | Exception
"""One scripted answer: text, contents, a message, a whole response, or an exception to raise."""

ScriptFunction: TypeAlias = Callable[
    [list[Message], ChatOptions], "ScriptedTurn | Awaitable[ScriptedTurn]"
]


def tool_call(
    name: str, arguments: dict[str, Any] | str | None = None, *, call_id: str | None = None
) -> FunctionCallContent:
    """A function-call content for scripts: ``tool_call("add", {"a": 1, "b": 2})``."""
    return FunctionCallContent(
        call_id or f"call_{new_id()[:12]}", name, {} if arguments is None else arguments
    )


class ScriptedCall:
    """One recorded request: the messages and the options it was made with.

    Requests of one conversation repeat its history; each call keeps only the messages
    after those it shares with the conversation's request before it (the same objects,
    past leading system messages, which agents make afresh each turn; the client remembers
    the last request of its 16 most recent conversations), so recording a long run costs
    memory for its messages once, not once per turn. `messages` rebuilds the list (a new
    one on each read).
    """

    __slots__ = ("_head", "_parent", "_shared", "_tail", "options", "stream")

    def __init__(self, messages: Sequence[Message], options: ChatOptions, stream: bool) -> None:
        self.options = options
        self.stream = stream
        self._head: tuple[Message, ...] = ()
        self._parent: ScriptedCall | None = None
        self._shared = 0
        self._tail: tuple[Message, ...] = tuple(messages)

    @classmethod
    def _record(
        cls,
        recent: dict[int, tuple[ScriptedCall, list[Message]]],
        messages: Sequence[Message],
        options: ChatOptions,
        stream: bool,
    ) -> ScriptedCall:
        """The record of `messages`, sharing what it can with the last call of the same
        conversation in `recent` (keyed by the first message after the leading system
        ones; each with its messages after those), which it updates."""
        lead = _lead(messages) if messages and messages[0].role == "system" else 0
        body = messages[lead:] if type(messages) is list else list(messages[lead:])
        key = id(body[0]) if body else 0
        previous, previous_body = recent.pop(key, (None, []))
        shared = _shared_prefix(previous_body, body) if previous is not None else 0
        call = cls(body[shared:], options, stream)
        if lead:
            call._head = tuple(messages[:lead])
        if shared:
            call._parent = previous
            call._shared = shared
        if body:
            recent[key] = (call, body)  # the body holds body[0]: its id stays the key's
            while len(recent) > _RECENT:
                del recent[next(iter(recent))]
        return call

    @property
    def messages(self) -> list[Message]:
        """The request's messages, in order."""
        chain: list[ScriptedCall] = []
        node: ScriptedCall | None = self
        while node is not None:
            chain.append(node)
            node = node._parent
        body: list[Message] = []
        for node in reversed(chain):
            del body[node._shared :]
            body.extend(node._tail)
        return [*self._head, *body]

    def __repr__(self) -> str:
        return f"ScriptedCall(messages={len(self.messages)}, stream={self.stream})"


_MAX_LEAD = 8
_RECENT = 16  # conversations a client remembers the last request of


def _lead(messages: Sequence[Message]) -> int:
    count = 0
    for message in messages[:_MAX_LEAD]:
        if message.role != "system":
            break
        count += 1
    return count


def _shared_prefix(before: list[Message], after: list[Message]) -> int:
    """How many first messages of `after` are those of `before`: the same objects, or (in
    the middle of a run of the same objects) equal ones."""
    count = len(before)
    if (
        count
        and len(after) >= count
        and after[0] is before[0]
        and after[count - 1] is before[count - 1]
        and after[:count] == before  # C speed: identical items compare without __eq__
    ):
        return count  # the usual case: the conversation only grew
    shared = 0
    for old, new in zip(before, after, strict=False):
        if old is not new:
            break
        shared += 1
    return shared


class ScriptedChatClient:
    """A chat client that plays a script.

    ``ScriptedChatClient(["hello", [tool_call("f", {...})], "done"])`` answers three
    requests in order, then raises `ModelError`. ``ScriptedChatClient(fn)`` asks
    ``fn(messages, options)`` (sync or async) for each answer. Streamed answers split text
    into ``chunk_size``-character pieces.

    Every request is recorded in `calls` by default, which is what a test reads; a client
    that answers for a long time (a served spec, a soak test) passes `max_calls` to keep
    only the last that many (0 keeps none).
    """

    def __init__(
        self,
        script: Sequence[ScriptedTurn] | ScriptFunction,
        *,
        chunk_size: int = 8,
        usage: Usage | None = None,
        model: str = "scripted",
        latency: float = 0.0,
        max_calls: int | None = None,
    ) -> None:
        if max_calls is not None and (type(max_calls) is not int or max_calls < 0):
            raise ConfigurationError(
                f"max_calls must be a whole number, 0 or more (None keeps every call), not "
                f"{max_calls!r}"
            )
        if callable(script):
            self._function: ScriptFunction | None = script
            self._turns: list[ScriptedTurn] = []
        else:
            self._function = None
            self._turns = list(script)
        self._position = 0
        self.chunk_size = max(1, chunk_size)
        self.usage = usage
        self.model = model
        self.latency = latency
        self.calls: list[ScriptedCall] = []
        """Every request, in order (see `ScriptedCall`); with `max_calls`, the last that
        many (up to half as many more between two trims)."""
        self.max_calls = max_calls
        self._closes = 0
        # the last request of recent conversations, for `ScriptedCall` to share
        self._recent: dict[int, tuple[ScriptedCall, list[Message]]] = {}

    @classmethod
    def from_cassette(cls, path: str | Path, *, chunk_size: int = 8) -> ScriptedChatClient:
        """A script of the answers recorded by `RecordingChatClient`, in recorded order.

        Requests are not checked and streams are re-chunked; use `ReplayChatClient` to check
        that requests match the recording and to replay streams exactly.
        """
        from .cassette import Cassette

        cassette = Cassette.load(path)
        turns: list[ScriptedTurn] = [
            i.response if i.response is not None else _failure(i) for i in cassette.interactions
        ]
        return cls(turns, chunk_size=chunk_size)

    # -- lifecycle: the same shape as network clients, so code written for one runs on both

    @property
    def closed(self) -> bool:
        """True once `aclose` (or the end of ``async with``) ran: a test can check that
        whoever owned the client closed it. Requests still work afterwards (network
        clients reconnect too)."""
        return self._closes > 0

    async def aclose(self) -> None:
        """Nothing to release; counted in `closed`."""
        self._closes += 1

    async def close(self) -> None:
        """Same as `aclose`."""
        await self.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    @property
    def remaining(self) -> int:
        """How many scripted turns are left (0 for a function script)."""
        return len(self._turns) - self._position

    def assert_complete(self) -> None:
        """Raise `AssertionError` if scripted turns were left unused."""
        if self.remaining:
            raise AssertionError(f"{self.remaining} scripted turn(s) were never requested")

    async def _next(
        self,
        messages: Sequence[Message],
        options: ChatOptions,
        stream: bool,
        token: CancellationToken | None,
    ) -> ChatResponse:
        self._note(messages, options, stream, token)
        if self.latency:
            await asyncio.sleep(self.latency)
        turn = self._take(messages, options)
        if type(turn) is not str and inspect.isawaitable(turn):  # text: the usual answer
            turn = await turn
        return self._to_response(turn, options)

    def _note(
        self,
        messages: Sequence[Message],
        options: ChatOptions,
        stream: bool,
        token: CancellationToken | None,
    ) -> None:
        if token is not None:
            token.raise_if_cancelled()
        self.calls.append(ScriptedCall._record(self._recent, messages, options, stream))
        if self.max_calls is not None:
            self._trim()

    def _trim(self) -> None:
        """Keep the last `max_calls` calls, trimming once half as many more piled up (one
        list copy every `max_calls // 2` calls, not a shift of the list on each)."""
        bound = self.max_calls
        calls = self.calls
        if bound is not None and len(calls) > bound + (bound >> 1):
            del calls[: len(calls) - bound]

    def _take(self, messages: Sequence[Message], options: ChatOptions) -> Any:
        """The next turn: the function's answer (maybe awaitable) or the script's next."""
        if self._function is not None:
            return self._function(list(messages), options)
        if self._position >= len(self._turns):
            raise ModelError(
                f"ScriptedChatClient ran out of turns after {len(self._turns)} request(s); "
                "add more turns to the script"
            )
        turn = self._turns[self._position]
        self._position += 1
        return turn

    def _to_response(self, turn: ScriptedTurn, options: ChatOptions) -> ChatResponse:
        if type(turn) is str:  # the usual turn, found with one check
            message = Message("assistant", turn)
        elif isinstance(turn, Exception):
            raise turn
        elif isinstance(turn, ChatResponse):
            return turn
        elif isinstance(turn, Message):
            message = turn
        elif isinstance(turn, str):
            message = Message("assistant", turn)
        elif isinstance(turn, list):
            message = Message("assistant", list(turn))
        else:
            message = Message("assistant", [turn])
        calls = message.function_calls
        response = ChatResponse(
            [message],
            usage=self.usage,
            finish_reason="tool_calls" if calls else "stop",
            model=self.model,
            response_id=new_id(),
        )
        if options.response_format is not None and not calls:
            response.value = parse_structured(message.text, options.response_format)
        return response

    async def get_response(
        self,
        messages: Sequence[Message],
        *,
        options: ChatOptions | None = None,
        cancellation_token: CancellationToken | None = None,
    ) -> ChatResponse:
        """The next scripted answer, whole."""
        options = options or ChatOptions()
        if self.latency:
            return await self._next(messages, options, False, cancellation_token)
        # what _next does, without its coroutine (no latency: no sleep); hot in benchmarks
        if cancellation_token is not None:  # `_note`, inline
            cancellation_token.raise_if_cancelled()
        self.calls.append(ScriptedCall._record(self._recent, messages, options, False))
        if self.max_calls is not None:
            self._trim()
        function = self._function
        turn = (
            function(list(messages), options)
            if function is not None
            else self._take(messages, options)
        )
        if type(turn) is str and options.response_format is None:
            # the usual answer, plain text: what `_to_response` makes of it, inline
            return ChatResponse(
                [Message("assistant", turn)],
                self.usage,
                "stop",
                self.model,
                new_id(),
            )
        if type(turn) is not str and inspect.isawaitable(turn):
            turn = await turn
        return self._to_response(turn, options)

    async def get_streaming_response(
        self,
        messages: Sequence[Message],
        *,
        options: ChatOptions | None = None,
        cancellation_token: CancellationToken | None = None,
    ) -> AsyncIterator[ChatResponseUpdate]:
        """The next scripted answer in chunks: text in `chunk_size` pieces, then usage."""
        response = await self._next(messages, options or ChatOptions(), True, cancellation_token)
        size = self.chunk_size
        for message in response.messages:
            for content in message.contents:
                pieces: list[Content]
                if type(content) is TextContent:
                    text = content.text
                    # An empty answer still streams one (empty) chunk, so that a streamed
                    # run keeps the message a whole response would have.
                    ends = range(0, max(len(text), 1), size)
                    pieces = [TextContent(text[i : i + size]) for i in ends]
                else:
                    pieces = [content]
                for piece in pieces:
                    if cancellation_token is not None:
                        cancellation_token.raise_if_cancelled()
                    yield ChatResponseUpdate(
                        [piece],
                        role=message.role,
                        message_id=message.message_id,
                        author_name=message.author_name,
                        model=response.model,
                        response_id=response.response_id,
                    )
        yield ChatResponseUpdate(
            [UsageContent(response.usage)] if response.usage else [],
            message_id=response.messages[-1].message_id if response.messages else None,
            finish_reason=response.finish_reason,
            model=response.model,
            response_id=response.response_id,
        )


def _failure(interaction: Interaction) -> Exception:
    if interaction.error is None:
        return ModelError("the recorded interaction has neither a response nor an error")
    return interaction.error.to_exception()
