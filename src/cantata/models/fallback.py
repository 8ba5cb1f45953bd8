"""`FallbackChatClient` (the next model when one fails) and `RoutingChatClient` (a model
chosen per request).

Both are `ChatClient`s over other clients, so they go wherever a client goes: an agent, a
team's selector, a durable run. The one subtle thing is a stream: it may move on to the next
client only before its first update reached the caller, who cannot take back what it saw.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Self, TypeAlias

from ..core import CancellationToken, ConfigurationError, Message, tracing
from ..core.retry import classify
from .client import ChatClient
from .types import ChatOptions, ChatResponse, ChatResponseUpdate

__all__ = [
    "FALLBACK_KEY",
    "ROUTE_KEY",
    "FallbackChatClient",
    "ModelRoute",
    "RoutingChatClient",
    "client_label",
]

ROUTE_KEY = "cantata.models.route"
"""Metadata key, on the answering message, of the client a `RoutingChatClient` chose."""
FALLBACK_KEY = "cantata.models.fallback"
"""Metadata key, on the answering message, of which client answered and why the clients
before it were passed over: ``{"answered_by": label, "model": name, "index": n,
"skipped": [{"client": label, "error": type, "message": text}, ...]}``. It is journaled
with the answer in a durable run, so a replay says which model gave it."""


def client_label(client: Any) -> str:
    """How a client is named in metadata and spans: its class, model and server."""
    name = type(client).__name__
    model = getattr(client, "model", None)
    url = getattr(client, "base_url", None)
    parts = [repr(model)] if isinstance(model, str) else []
    if isinstance(url, str):
        parts.append(url)
    return f"{name}({', '.join(parts)})" if parts else name


def _retryable(exc: BaseException) -> bool:
    """Rate limits, timeouts, 5xx and dropped connections: what another model may not have."""
    return isinstance(exc, Exception) and classify(exc) == "retryable"


@dataclass(slots=True)
class _Skip:
    client: str
    error: str
    message: str

    def data(self) -> dict[str, str]:
        return {"client": self.client, "error": self.error, "message": self.message[:500]}


class FallbackChatClient:
    """Tries its clients in order: the first that answers wins.

    ``FallbackChatClient(primary, backup)`` moves on to `backup` when `primary` fails with an
    error worth another try elsewhere (by default: a rate limit, a timeout, a server error
    or a dropped connection; `should_fall_back` decides otherwise). Any other error (a bad
    request, a refused key) is raised at once: the next model would refuse it too. When
    every client fails, the last error is raised with a note naming the earlier ones.

    The answering message carries ``metadata[FALLBACK_KEY]`` (who answered, and each error
    that made it move on), and each passed-over attempt is a span with its error when
    tracing is on. A stream moves on only before its first update.
    """

    def __init__(
        self,
        *clients: ChatClient,
        should_fall_back: Callable[[BaseException], bool] | None = None,
    ) -> None:
        if not clients:
            raise ConfigurationError("FallbackChatClient needs at least one client")
        for client in clients:
            if not isinstance(client, ChatClient):
                raise ConfigurationError(
                    f"FallbackChatClient takes ChatClients, got {type(client).__name__}"
                )
        self.clients: tuple[ChatClient, ...] = clients
        self.should_fall_back = should_fall_back or _retryable

    @property
    def model(self) -> str | None:
        """The first client's model (what a request names when it names none)."""
        model = getattr(self.clients[0], "model", None)
        return model if isinstance(model, str) else None

    def __repr__(self) -> str:
        return f"FallbackChatClient({', '.join(client_label(c) for c in self.clients)})"

    def _give_up(self, exc: BaseException, index: int) -> bool:
        return index == len(self.clients) - 1 or not self.should_fall_back(exc)

    async def get_response(
        self,
        messages: Sequence[Message],
        *,
        options: ChatOptions | None = None,
        cancellation_token: CancellationToken | None = None,
    ) -> ChatResponse:
        """The first answer of the clients, in order."""
        skipped: list[_Skip] = []
        for index, client in enumerate(self.clients):
            label = client_label(client)
            try:
                with _attempt_span(label, index, skipped):
                    response = await client.get_response(
                        messages, options=options, cancellation_token=cancellation_token
                    )
            except Exception as exc:
                if self._give_up(exc, index):
                    _note_skipped(exc, skipped)
                    raise
                skipped.append(_Skip(label, type(exc).__name__, str(exc)))
                continue
            model = response.model or getattr(client, "model", None)
            return _tagged(response, FALLBACK_KEY, _record(label, index, model, skipped))
        raise AssertionError("unreachable: the last client's error is raised")  # pragma: no cover

    async def get_streaming_response(
        self,
        messages: Sequence[Message],
        *,
        options: ChatOptions | None = None,
        cancellation_token: CancellationToken | None = None,
    ) -> AsyncIterator[ChatResponseUpdate]:
        """The first client's stream that opens; the record rides on its first update."""
        skipped: list[_Skip] = []
        for index, client in enumerate(self.clients):
            label = client_label(client)
            stream = client.get_streaming_response(
                messages, options=options, cancellation_token=cancellation_token
            )
            try:
                with _attempt_span(label, index, skipped):
                    first = await anext(aiter(stream))
            except StopAsyncIteration:
                first = None
            except Exception as exc:
                await _close(stream)
                if self._give_up(exc, index):
                    _note_skipped(exc, skipped)
                    raise
                skipped.append(_Skip(label, type(exc).__name__, str(exc)))
                continue
            try:
                if first is None:
                    return
                model = first.model or getattr(client, "model", None)
                record = _record(label, index, model, skipped)
                first.metadata = {**(first.metadata or {}), FALLBACK_KEY: record}
                yield first
                async for update in stream:
                    yield update
            finally:
                await _close(stream)
            return

    async def close(self) -> None:
        """Close every client that can be closed."""
        for client in self.clients:
            await _close_client(client)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()


ModelRoute: TypeAlias = Callable[
    [Sequence[Message], ChatOptions], "ChatClient | str | Awaitable[ChatClient | str]"
]
"""Picks the client of one request from its messages and options: a client, or the name of
one of the router's clients."""


class RoutingChatClient:
    """Sends each request to the client a function of the request picks.

    ``RoutingChatClient(route, clients={"small": fast, "large": strong})`` with
    ``route(messages, options)`` returning ``"small"``, ``"large"`` or a client: a cheap
    model for short questions, a strong one for long threads or for requests with tools.
    The function may be async. The answering message's metadata names the chosen client
    (``metadata[ROUTE_KEY]``).
    """

    def __init__(
        self,
        route: ModelRoute,
        *,
        clients: dict[str, ChatClient] | None = None,
        default_options: ChatOptions | None = None,
    ) -> None:
        if not callable(route):
            raise ConfigurationError("RoutingChatClient needs a function route(messages, options)")
        self.route = route
        self.clients = dict(clients or {})
        self.default_options = default_options or ChatOptions()

    def __repr__(self) -> str:
        return f"RoutingChatClient({', '.join(self.clients)})"

    async def _pick(
        self, messages: Sequence[Message], options: ChatOptions | None
    ) -> tuple[str, ChatClient]:
        chosen = self.route(messages, self.default_options.merge(options))
        if inspect.isawaitable(chosen):
            chosen = await chosen
        if isinstance(chosen, str):
            client = self.clients.get(chosen)
            if client is None:
                raise ConfigurationError(
                    f"RoutingChatClient: the route chose {chosen!r}, which is not one of its "
                    f"clients {sorted(self.clients)}; return one of those names or a client"
                )
            return chosen, client
        if not isinstance(chosen, ChatClient):
            raise ConfigurationError(
                "RoutingChatClient: the route must return a ChatClient or a client's name, "
                f"got {type(chosen).__name__}"
            )
        return client_label(chosen), chosen

    async def get_response(
        self,
        messages: Sequence[Message],
        *,
        options: ChatOptions | None = None,
        cancellation_token: CancellationToken | None = None,
    ) -> ChatResponse:
        """The answer of the client the route picks."""
        name, client = await self._pick(messages, options)
        response = await client.get_response(
            messages, options=options, cancellation_token=cancellation_token
        )
        return _tagged(response, ROUTE_KEY, name)

    async def get_streaming_response(
        self,
        messages: Sequence[Message],
        *,
        options: ChatOptions | None = None,
        cancellation_token: CancellationToken | None = None,
    ) -> AsyncIterator[ChatResponseUpdate]:
        """The stream of the client the route picks."""
        name, client = await self._pick(messages, options)
        stream = client.get_streaming_response(
            messages, options=options, cancellation_token=cancellation_token
        )
        first = True
        try:
            async for update in stream:
                if first:
                    update.metadata = {**(update.metadata or {}), ROUTE_KEY: name}
                    first = False
                yield update
        finally:
            await _close(stream)

    async def close(self) -> None:
        """Close every named client that can be closed."""
        for client in self.clients.values():
            await _close_client(client)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()


def _record(label: str, index: int, model: Any, skipped: list[_Skip]) -> dict[str, Any]:
    return {
        "answered_by": label,
        "model": model if isinstance(model, str) else None,
        "index": index,
        "skipped": [s.data() for s in skipped],
    }


def _note_skipped(exc: BaseException, skipped: list[_Skip]) -> None:
    for skip in skipped:
        exc.add_note(f"before it, {skip.client} failed: {skip.error}: {skip.message[:300]}")


def _attempt_span(label: str, index: int, skipped: list[_Skip]) -> Any:
    """A span per attempt, with the error that brought the fallback to it (a no-op while
    tracing is off)."""
    if not tracing.enabled():
        return tracing.span(label)
    attributes: dict[str, Any] = {"cantata.fallback.client": label, "cantata.fallback.index": index}
    if skipped:
        last = skipped[-1]
        attributes["cantata.fallback.reason"] = f"{last.error}: {last.message[:300]}"
        attributes["cantata.fallback.skipped"] = [s.client for s in skipped]
    return tracing.span(f"fallback {label}", attributes)


def _tagged(response: ChatResponse, key: str, value: Any) -> ChatResponse:
    """The response with `value` under `key` in its assistant messages' metadata (copies:
    a client may hand out the same message objects again)."""
    response.messages = [
        m.copy(metadata={**m.metadata, key: value}) if m.role == "assistant" else m
        for m in response.messages
    ]
    return response


async def _close(stream: Any) -> None:
    close = getattr(stream, "aclose", None)
    if close is not None:
        await close()


async def _close_client(client: Any) -> None:
    close = getattr(client, "close", None) or getattr(client, "aclose", None)
    if close is None:
        return
    result = close()
    if inspect.isawaitable(result):
        await result
