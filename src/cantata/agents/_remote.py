"""What the remote agents (`ResponsesAgent`, `A2AAgent`) share: a service thread that queues
writes for the next turn and remembers the turns it took part in; calls to the server
bounded by the run's `CancellationToken`, their failures mapped to cantata errors; and the
answer message the server's text becomes.

The one subtle thing: a write to the thread outside a run (a team's broadcast, a caller's
``on_new_message``) cannot reach the server on its own, so it waits in ``_pending`` and goes
with the next turn; the turn's success (`RemoteThread._took_turn`) is what moves it into
the history.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from ..core import (
    CancellationToken,
    CancelledError,
    CantataError,
    Content,
    Message,
    SerializationError,
    ThreadError,
    from_json,
)
from .agent import AGENT_ID_KEY
from .thread import ServiceThread

if TYPE_CHECKING:
    from .agent import Agent

T = TypeVar("T")
ErrorMap = Callable[[Exception], CantataError | None]
"""A remote agent's reading of its client library's failures (None: not one of them)."""


async def bounded(work: Callable[[], Awaitable[T]], token: CancellationToken | None) -> T:
    """`work()`, cancelled when `token` is (a cantata CancelledError then). `work` is only
    called once the token is known not to be cancelled, so no coroutine is left unawaited."""
    if token is None:
        return await work()
    token.raise_if_cancelled()
    task = asyncio.ensure_future(work())
    token.link_future(task)
    try:
        return await task
    except asyncio.CancelledError:
        if token.is_cancelled:
            raise CancelledError("the run was cancelled through its CancellationToken") from None
        raise


async def mapped(request: Awaitable[T], errors: ErrorMap) -> T:
    """`request`'s result; a failure `errors` knows becomes its cantata error."""
    try:
        return await request
    except Exception as exc:
        known = errors(exc)
        if known is None:
            raise
        raise known from None


async def call(
    work: Callable[[], Awaitable[T]], errors: ErrorMap, token: CancellationToken | None
) -> T:
    """One call to the server: bounded by `token`, its failures mapped by `errors`."""
    return await bounded(lambda: mapped(work(), errors), token)


async def events(
    stream: AsyncIterable[T], errors: ErrorMap, token: CancellationToken | None
) -> AsyncIterator[T]:
    """The stream's events, each wait bounded by `token` and its failures mapped; the
    stream's iterator is closed however the loop ends."""
    iterator = aiter(stream)
    try:
        while True:
            try:
                event = await call(lambda: anext(iterator), errors, token)
            except StopAsyncIteration:
                return
            yield event
    finally:
        close = getattr(iterator, "aclose", None)
        if close is not None:
            await close()


def answer_message(agent: Agent, text: str | list[Content], message_id: str) -> Message:
    """The server's answer (its text, or contents) as the remote agent's own message."""
    return Message(
        "assistant",
        text,
        author_name=agent.name,
        message_id=message_id,
        metadata={AGENT_ID_KEY: agent.id},
    )


def load_messages(value: Any, name: str, what: str) -> list[Message]:
    """The messages of field `name` of a serialized `what` thread, or a SerializationError."""
    if type(value) is not list:
        raise SerializationError(f"a serialized {what} thread needs a list '{name}'")
    out = [from_json(v) for v in value]
    if any(type(m) is not Message for m in out):
        raise SerializationError(f"'{name}' of a serialized {what} thread must be messages")
    return out


class RemoteThread(ServiceThread):
    """A service thread the server makes with its first turn. Writes between turns wait in
    ``_pending``; ``_history`` is None when the history is on the server only (a thread
    restored from its id), and `_restored_hint` then says where to read it."""

    _history: list[Message] | None
    _pending: list[Message]

    async def _create(self) -> None:
        pass  # the server makes the conversation with the first turn

    async def _create_on_service(self) -> str:  # never called: see _create
        raise ThreadError(f"a {type(self).__name__} is created on the server by its first turn")

    def _check_outgoing(self, messages: list[Message]) -> None:
        """Refuse now what could never be sent (nothing by default)."""

    async def _on_new_messages(self, messages: list[Message]) -> None:
        self._check_outgoing(messages)
        self._pending.extend(messages)  # sent with the next run

    def _restored_hint(self) -> str:
        raise NotImplementedError

    async def _get_messages(self) -> list[Message]:
        if self._history is None:
            raise ThreadError(self._restored_hint())
        return [*self._history, *self._pending]

    def _took_turn(self, incoming: list[Message], answer: Message, thread_id: str) -> None:
        """A turn succeeded: what was pending and sent joins the history, and the thread
        is named by `thread_id` (the context id, the last response id)."""
        if self._history is not None:
            self._history.extend([*self._pending, *incoming, answer])
        self._set_id(thread_id)
        self._pending = []
