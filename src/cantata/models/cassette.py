"""Record a real model session to a file, and replay it offline.

``RecordingChatClient(real_client, "session.json")`` passes every request through and
writes a cassette: each request (messages and options), its response and, for streams,
every update. ``ReplayChatClient("session.json")`` answers the same requests from the file
without touching a model, so a session with a real model becomes a fast offline test.

Cassettes are JSON written through cantata's type registry, with a ``schema_version``.
Version notes:

- 1: ``{"schema_version": 1, "interactions": [{"request", "response", "updates", "error"}]}``;
  a failed request has an ``error`` (kind, message, status code, body, retry-after) instead
  of a ``response``, and a failed stream keeps the updates that came before the failure.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections import deque
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ..core import (
    CancellationToken,
    Message,
    ModelError,
    ModelHTTPError,
    ModelOutputError,
    SchemaVersionError,
    SerializationError,
    TimeoutError,
    UnknownTypeError,
    dumps,
    loads,
    to_json,
)
from .client import ChatClient
from .types import ChatOptions, ChatResponse, ChatResponseUpdate, parse_structured
from .types import response_format_schema as _schema_of

__all__ = [
    "CASSETTE_SCHEMA_VERSION",
    "Cassette",
    "CassetteMismatchError",
    "Interaction",
    "RecordedError",
    "RecordingChatClient",
    "ReplayChatClient",
    "request_snapshot",
]

CASSETTE_SCHEMA_VERSION = 1


class CassetteMismatchError(ModelError):
    """A replayed request differs from every recorded one that is left."""


ErrorKind = Literal["http", "timeout", "output", "model"]
_KINDS: tuple[ErrorKind, ...] = ("http", "timeout", "output", "model")


@dataclass(slots=True)
class RecordedError:
    """A model failure as recorded, so that a replay fails the same way."""

    kind: ErrorKind
    message: str
    status_code: int | None = None
    body: Any = None
    retry_after: float | None = None

    @classmethod
    def of(cls, exc: ModelError | TimeoutError) -> RecordedError:
        """Capture a model error (HTTP status, body and retry-after included)."""
        if isinstance(exc, ModelHTTPError):
            return cls("http", str(exc), exc.status_code, _jsonable(exc.body), exc.retry_after)
        if isinstance(exc, TimeoutError):
            return cls("timeout", str(exc))
        return cls("output" if isinstance(exc, ModelOutputError) else "model", str(exc))

    def to_exception(self) -> ModelError | TimeoutError:
        """The same error, rebuilt."""
        if self.kind == "http":
            return ModelHTTPError(
                self.message,
                status_code=self.status_code or 0,
                body=self.body,
                retry_after=self.retry_after,
            )
        if self.kind == "timeout":
            return TimeoutError(self.message)
        return ModelOutputError(self.message) if self.kind == "output" else ModelError(self.message)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON data."""
        return {
            "kind": self.kind,
            "message": self.message,
            "status_code": self.status_code,
            "body": self.body,
            "retry_after": self.retry_after,
        }

    @classmethod
    def from_dict(cls, data: Any) -> RecordedError:
        """Read `to_dict` output; malformed data raises `SerializationError`."""
        if not isinstance(data, dict) or data.get("kind") not in _KINDS:
            raise SerializationError(f"a recorded error needs a kind among {list(_KINDS)}")
        message, status = data.get("message"), data.get("status_code")
        retry = data.get("retry_after")
        if not isinstance(message, str) or not isinstance(status, int | None):
            raise SerializationError("a recorded error needs a text message and an int status")
        if not isinstance(retry, int | float | None) or isinstance(retry, bool):
            raise SerializationError("field 'retry_after' of a recorded error must be a number")
        return cls(data["kind"], message, status, data.get("body"), retry)


def _jsonable(value: Any) -> Any:
    try:
        to_json(value)
    except UnknownTypeError:
        return str(value)
    return value


@dataclass(slots=True)
class Interaction:
    """One recorded request and its answer or error (and the stream updates, if streamed)."""

    request: dict[str, Any]
    response: ChatResponse | None
    updates: list[ChatResponseUpdate] | None = None
    error: RecordedError | None = None


@dataclass(slots=True)
class Cassette:
    """The interactions of one session, in the order they finished."""

    interactions: list[Interaction] = field(default_factory=list)

    def dumps(self) -> str:
        """The cassette as JSON text."""
        return dumps(
            {
                "schema_version": CASSETTE_SCHEMA_VERSION,
                "interactions": [
                    {
                        "request": i.request,
                        "response": i.response,
                        "updates": i.updates,
                        "error": i.error.to_dict() if i.error is not None else None,
                    }
                    for i in self.interactions
                ],
            }
        )

    @classmethod
    def loads(cls, text: str | bytes) -> Cassette:
        """Read a cassette; refuses an unknown schema version or malformed data."""
        data = loads(text)
        if not isinstance(data, dict):
            raise SerializationError("a cassette must be a JSON object")
        version = data.get("schema_version")
        if version != CASSETTE_SCHEMA_VERSION:
            raise SchemaVersionError(
                f"cassette schema_version {version!r} is not supported (this cantata reads "
                f"{CASSETTE_SCHEMA_VERSION}); record the session again"
            )
        raw = data.get("interactions")
        if not isinstance(raw, list):
            raise SerializationError("field 'interactions' of a cassette must be a list")
        return cls([_interaction(item, n) for n, item in enumerate(raw)])

    def save(self, path: str | Path) -> None:
        """Write atomically: a crash never leaves half a cassette."""
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(target.name + ".tmp")
        tmp.write_text(self.dumps(), encoding="utf-8")
        os.replace(tmp, target)

    @classmethod
    def load(cls, path: str | Path) -> Cassette:
        """Read a cassette file."""
        try:
            text = Path(path).read_text(encoding="utf-8")
        except FileNotFoundError:
            raise SerializationError(
                f"no cassette at {str(path)!r}; record one with RecordingChatClient"
            ) from None
        return cls.loads(text)


def _interaction(item: Any, n: int) -> Interaction:
    if not isinstance(item, dict) or not isinstance(item.get("request"), dict):
        raise SerializationError(f"interaction {n} of the cassette has no request object")
    response = item.get("response")
    error = RecordedError.from_dict(item["error"]) if item.get("error") is not None else None
    if not isinstance(response, ChatResponse) and (response is not None or error is None):
        raise SerializationError(f"interaction {n} of the cassette has no chat response")
    updates = item.get("updates")
    if updates is not None and not (
        isinstance(updates, list) and all(isinstance(u, ChatResponseUpdate) for u in updates)
    ):
        raise SerializationError(f"interaction {n} of the cassette has malformed updates")
    return Interaction(item["request"], response, updates, error)


def request_snapshot(
    messages: Sequence[Message], options: ChatOptions, *, stream: bool
) -> dict[str, Any]:
    """A request as comparable JSON: message ids and metadata are left out. No model sees
    them, and they differ from run to run (the id of the agent a message went through is
    new in every process), so a session recorded once replays in another."""
    out_messages = []
    for m in messages:
        data = to_json(m)
        data.pop("id", None)
        data.pop("metadata", None)
        out_messages.append(data)
    opts: dict[str, Any] = {}
    for key in ("model", "temperature", "top_p", "max_tokens", "stop", "seed", "tool_choice"):
        value = getattr(options, key)
        if value is not None:
            opts[key] = to_json(value)
    if options.tools:
        opts["tools"] = [to_json(t) for t in options.tools]
    if options.response_format is not None:
        name, schema = _schema_of(options.response_format)
        opts["response_format"] = {"name": name, "schema": schema}
    if options.extra:
        opts["extra"] = to_json(options.extra)
    return {"messages": out_messages, "options": opts, "stream": stream}


class RecordingChatClient:
    """Wraps any chat client and records every finished request to a cassette file.

    The file is rewritten after each interaction, so it is complete even if the session
    stops early. Model failures (`ModelError`, cantata's `TimeoutError`) are recorded and
    replayed as failures; abandoned streams and cancelled requests are not recorded.
    """

    def __init__(self, inner: ChatClient, path: str | Path) -> None:
        self.inner = inner
        self.path = Path(path)
        self.cassette = Cassette()
        self._lock = asyncio.Lock()

    async def _record(self, interaction: Interaction) -> None:
        async with self._lock:
            self.cassette.interactions.append(interaction)
            await asyncio.to_thread(self.cassette.save, self.path)

    async def get_response(
        self,
        messages: Sequence[Message],
        *,
        options: ChatOptions | None = None,
        cancellation_token: CancellationToken | None = None,
    ) -> ChatResponse:
        """Ask the inner client, record the exchange, return the answer."""
        request = request_snapshot(messages, options or ChatOptions(), stream=False)
        try:
            response = await self.inner.get_response(
                messages, options=options, cancellation_token=cancellation_token
            )
        except (ModelError, TimeoutError) as exc:
            await self._record(Interaction(request, None, error=RecordedError.of(exc)))
            raise
        await self._record(Interaction(request, response))
        return response

    async def get_streaming_response(
        self,
        messages: Sequence[Message],
        *,
        options: ChatOptions | None = None,
        cancellation_token: CancellationToken | None = None,
    ) -> AsyncIterator[ChatResponseUpdate]:
        """Stream from the inner client; the exchange is recorded once the stream ends."""
        request = request_snapshot(messages, options or ChatOptions(), stream=True)
        updates: list[ChatResponseUpdate] = []
        try:
            async for update in self.inner.get_streaming_response(
                messages, options=options, cancellation_token=cancellation_token
            ):
                updates.append(update)
                yield update
        except (ModelError, TimeoutError) as exc:
            error = RecordedError.of(exc)
            await self._record(Interaction(request, None, updates, error))
            raise
        await self._record(Interaction(request, ChatResponse.from_updates(updates), updates))


class ReplayChatClient:
    """Answers from a cassette, offline.

    With ``check_requests=True`` (the default) each request must equal a recorded one not
    yet used (message ids aside); the first such one answers, so concurrent requests replay
    correctly whatever their order. With ``check_requests=False`` answers come in order.
    Streams replay the recorded updates exactly.
    """

    def __init__(self, cassette: Cassette | str | Path, *, check_requests: bool = True) -> None:
        self.cassette = cassette if isinstance(cassette, Cassette) else Cassette.load(cassette)
        self.check_requests = check_requests
        self._requests = [_comparable(i.request) for i in self.cassette.interactions]
        self._by_key: dict[str, deque[int]] = {}
        for n, recorded in enumerate(self._requests):
            self._by_key.setdefault(_key(recorded), deque()).append(n)
        self._next = 0
        self._used: set[int] = set()
        self.calls: list[dict[str, Any]] = []

    @property
    def remaining(self) -> int:
        """How many recorded interactions have not been replayed."""
        return len(self.cassette.interactions) - len(self._used)

    def assert_complete(self) -> None:
        """Raise `AssertionError` if recorded interactions were never requested."""
        if self.remaining:
            raise AssertionError(f"{self.remaining} recorded interaction(s) were never replayed")

    def _take(self, request: dict[str, Any], token: CancellationToken | None) -> Interaction:
        if token is not None:
            token.raise_if_cancelled()
        self.calls.append(request)
        total = len(self.cassette.interactions)
        while self._next < total and self._next in self._used:
            self._next += 1
        if self._next >= total:
            raise CassetteMismatchError(
                f"the cassette has no interaction left for request {len(self.calls)}; "
                "record the session again"
            )
        chosen = self._next
        if self.check_requests:
            match = self._match(request)
            if match is None:
                raise CassetteMismatchError(
                    f"request {len(self.calls)} matches no recorded interaction left; "
                    f"the next recorded one (#{chosen}) differs in "
                    f"{_difference(self._requests[chosen], request)}; "
                    "record the session again, or pass check_requests=False"
                )
            chosen = match
        self._used.add(chosen)
        return self.cassette.interactions[chosen]

    def _match(self, request: dict[str, Any]) -> int | None:
        """The first unused recorded interaction equal to `request`: looked up by its JSON
        text (a replay of n requests costs n look-ups, not n scans of the cassette), then by
        a scan, for requests equal as data but written differently (1 and 1.0)."""
        queue = self._by_key.get(_key(request))
        while queue:
            n = queue[0]
            if n not in self._used and self._requests[n] == request:
                queue.popleft()
                return n
            queue.popleft()
        total = len(self._requests)
        return next(
            (n for n in range(self._next, total)
             if n not in self._used and self._requests[n] == request),
            None,
        )  # fmt: skip

    async def get_response(
        self,
        messages: Sequence[Message],
        *,
        options: ChatOptions | None = None,
        cancellation_token: CancellationToken | None = None,
    ) -> ChatResponse:
        """The recorded answer to this request."""
        opts = options or ChatOptions()
        interaction = self._take(request_snapshot(messages, opts, stream=False), cancellation_token)
        if interaction.response is None:
            raise _recorded_failure(interaction)
        response = _copy(interaction.response)
        if opts.response_format is not None and not response.function_calls:
            response.value = parse_structured(response.text, opts.response_format)
        return response

    async def get_streaming_response(
        self,
        messages: Sequence[Message],
        *,
        options: ChatOptions | None = None,
        cancellation_token: CancellationToken | None = None,
    ) -> AsyncIterator[ChatResponseUpdate]:
        """The recorded stream (or the recorded whole answer as one update)."""
        opts = options or ChatOptions()
        interaction = self._take(request_snapshot(messages, opts, stream=True), cancellation_token)
        updates = interaction.updates
        if updates is None:
            r = interaction.response
            if r is None:
                raise _recorded_failure(interaction)
            updates = [
                ChatResponseUpdate(
                    list(m.contents), role=m.role, message_id=m.message_id, model=r.model
                )
                for m in r.messages
            ]
        for update in updates:
            if cancellation_token is not None:
                cancellation_token.raise_if_cancelled()
            await asyncio.sleep(0)
            yield update
        if interaction.error is not None:
            raise interaction.error.to_exception()


def _key(request: dict[str, Any]) -> str:
    return json.dumps(request, sort_keys=True, ensure_ascii=False, default=repr)


def _comparable(request: dict[str, Any]) -> dict[str, Any]:
    """A recorded request as `request_snapshot` makes one now (cassettes recorded before
    it left metadata out still hold it)."""
    messages = request.get("messages")
    if not isinstance(messages, list) or not any(
        isinstance(m, dict) and "metadata" in m for m in messages
    ):
        return request
    stripped = [
        {k: v for k, v in m.items() if k != "metadata"} if isinstance(m, dict) else m
        for m in messages
    ]
    return {**request, "messages": stripped}


def _recorded_failure(interaction: Interaction) -> ModelError | TimeoutError:
    if interaction.error is None:  # refused by Cassette.loads; kept for hand-built cassettes
        return ModelError("the recorded interaction has neither a response nor an error")
    return interaction.error.to_exception()


def _copy(response: ChatResponse) -> ChatResponse:
    return ChatResponse(
        [m.copy() for m in response.messages],
        usage=response.usage,
        finish_reason=response.finish_reason,
        model=response.model,
        response_id=response.response_id,
    )


def _difference(recorded: dict[str, Any], actual: dict[str, Any]) -> str:
    if recorded.get("stream") != actual.get("stream"):
        return "streaming (one was streamed, the other not)"
    rec_msgs, act_msgs = recorded.get("messages", []), actual.get("messages", [])
    for n, (a, b) in enumerate(zip(rec_msgs, act_msgs, strict=False)):
        if a != b:
            return f"message {n}: recorded {dumps(a)[:120]}, got {dumps(b)[:120]}"
    if len(rec_msgs) != len(act_msgs):
        return f"the number of messages: recorded {len(rec_msgs)}, got {len(act_msgs)}"
    return f"the options: recorded {recorded.get('options')}, got {actual.get('options')}"
