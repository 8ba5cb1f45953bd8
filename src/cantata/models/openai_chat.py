"""`OpenAIChatClient`: any server that speaks the OpenAI Chat Completions API.

Built on the official `openai` SDK, which brings retries (with back-off) and timeouts;
this module maps messages, tools and structured output onto the wire format, assembles
streamed tool calls, and turns SDK errors into cantata's hierarchy. The async
context-manager methods are written out as in every client (see `local.py`).
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import urllib.parse
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Literal, Self, get_args

import openai
from openai import AsyncOpenAI

from ..core import (
    CancellationToken,
    CantataError,
    ConfigurationError,
    Content,
    FunctionCallContent,
    Message,
    ModelError,
    TextContent,
    UsageContent,
    new_id,
)
from ._cancellable import await_cancellable
from ._errors import KeySource, map_openai_error, refused_feature
from ._openai_mapping import (
    FEATURE_FALLBACKS,
    Feature,
    features_used,
    parse_arguments,
    request_params,
    usage_from,
)
from ._tool_call_assembly import ToolCallAssembler
from .guard import check_model_requests_allowed
from .types import ChatOptions, ChatResponse, ChatResponseUpdate, parse_structured

__all__ = [
    "API_KEY_VARIABLES",
    "Feature",
    "MaxTokensField",
    "OpenAIChatClient",
    "StructuredOutputMode",
]

MaxTokensField = Literal["max_tokens", "max_completion_tokens"]
"""The request field that carries `ChatOptions.max_tokens`."""
StructuredOutputMode = Literal["json_schema", "json_object"]
"""How `response_format` goes on the wire: OpenAI's ``json_schema`` (OpenAI, Azure, vLLM,
Ollama), or ``json_object`` with a ``schema`` field (llama.cpp's server)."""

API_KEY_VARIABLES = ("CANTATA_API_KEY", "OPENAI_API_KEY")
"""Environment variables read for the API key when none is passed, first found wins."""

_log = logging.getLogger("cantata.models")
# The SDK insists on a credential; with no key this one is never sent (the header is omitted).
_UNSENT_KEY = "no-key-set"
_OPENAI_URL = "https://api.openai.com/v1"


class OpenAIChatClient:
    """A chat client for OpenAI and every OpenAI-compatible server.

    ``OpenAIChatClient("gpt-4o-mini")`` talks to OpenAI with the key in ``CANTATA_API_KEY``
    or ``OPENAI_API_KEY``; ``OpenAIChatClient("qwen2.5", base_url="http://127.0.0.1:11434/v1")``
    talks to a local server (with no key set, no ``Authorization`` header is sent). Retries
    and timeouts are the SDK's (`max_retries`, `timeout`); errors arrive as `ModelHTTPError`,
    `ModelError` or cantata's `TimeoutError`. Azure OpenAI works through its v1 endpoint as
    `base_url` with its key. Use it as ``async with`` (or call `close`) to close its HTTP
    connections.

    `structured_output` picks how `response_format` is sent (see `StructuredOutputMode`);
    `stream_usage` asks for token usage at the end of streams; `author_names` sends each
    message's `author_name` as the wire ``name``; `max_tokens_field` is
    ``"max_completion_tokens"`` for OpenAI's reasoning models, which refuse ``max_tokens``;
    `default_options` apply to every request. `key_variables` are the environment variables
    read for the key when `api_key` is not given (first set wins; ``()`` reads none), so a
    client for another provider never sends OpenAI's key.

    With `fallbacks` on (the default), a feature the server refuses (a forced
    ``tool_choice``, a stream that may call tools, a ``json_schema`` or ``json_object``
    response format; see `Feature`) is replaced by what the server has (``auto`` plus an
    instruction, one whole answer, ``json_object`` or the prompt plus the schema, validated
    after) and remembered for the client's lifetime (`refused_features`), so it costs one
    failed request; with `fallbacks` off, the error names the feature and what to change.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 2,
        default_options: ChatOptions | None = None,
        structured_output: StructuredOutputMode = "json_schema",
        stream_usage: bool = True,
        author_names: bool = True,
        max_tokens_field: MaxTokensField = "max_tokens",
        default_headers: dict[str, str] | None = None,
        fallbacks: bool = True,
        key_variables: Sequence[str] = API_KEY_VARIABLES,
    ) -> None:
        if not model:
            raise ConfigurationError("OpenAIChatClient needs a model name, e.g. 'gpt-4o-mini'")
        key, source = _api_key(api_key, key_variables)
        if key is None and base_url is None:
            raise ConfigurationError(
                f"OpenAIChatClient for model {model!r} on OpenAI needs an API key: set "
                "CANTATA_API_KEY (or OPENAI_API_KEY) or pass api_key=, or pass base_url= "
                "for another server"
            )
        self.key_variables = tuple(key_variables)
        _check_settings(timeout, max_retries, structured_output, max_tokens_field)
        self.model = model
        self.base_url = _check_base_url(base_url)
        self.timeout = timeout
        self.max_retries = max_retries
        self.default_options = default_options or ChatOptions()
        self.structured_output: StructuredOutputMode = structured_output
        self.stream_usage = stream_usage
        self.author_names = author_names
        self.max_tokens_field: MaxTokensField = max_tokens_field
        self.fallbacks = fallbacks
        self._api_key = key
        self._key_source: KeySource = source
        self._headers = dict(default_headers or {})
        self._clients: dict[asyncio.AbstractEventLoop, AsyncOpenAI] = {}
        # with no key, no Authorization header at all (the SDK would send a placeholder)
        self._omit_auth = key is None and not any(
            k.lower() == "authorization" for k in self._headers
        )
        self._refused: set[Feature] = set()
        self._confirmed: set[Feature] = set()

    def __repr__(self) -> str:
        return f"OpenAIChatClient(model={self.model!r}, base_url={self.base_url!r})"

    @property
    def refused_features(self) -> frozenset[Feature]:
        """The features this server refused; requests use their fallbacks instead."""
        return frozenset(self._refused)

    def _sdk(self) -> AsyncOpenAI:
        # One SDK client per event loop: its HTTP connection pool belongs to the loop.
        loop = asyncio.get_running_loop()
        client = self._clients.get(loop)
        if client is None:
            for old in [lp for lp in self._clients if lp.is_closed()]:
                del self._clients[old]
            client = self._new_sdk()
            self._clients[loop] = client
        return client

    def _new_sdk(self) -> AsyncOpenAI:
        """The SDK client of one event loop (the Azure client makes its own)."""
        return AsyncOpenAI(
            api_key=self._api_key or _UNSENT_KEY,
            base_url=self.base_url,
            timeout=self.timeout,
            max_retries=self.max_retries,
            default_headers=self._headers or None,
        )

    async def close(self) -> None:
        """Close the HTTP connections (those of other, closed event loops are dropped)."""
        loop = asyncio.get_running_loop()
        clients, self._clients = self._clients, {}
        for owner, client in clients.items():
            if owner is loop:
                await client.close()
            elif not owner.is_closed():
                self._clients[owner] = client  # only its own loop can close it

    async def aclose(self) -> None:
        """Same as `close`."""
        await self.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    def _prepare(
        self, messages: Sequence[Message], options: ChatOptions | None
    ) -> tuple[Sequence[Message], ChatOptions]:
        check_model_requests_allowed("OpenAIChatClient")
        return messages, self.default_options.merge(options)

    def _params(
        self,
        messages: Sequence[Message],
        options: ChatOptions,
        refused: set[Feature],
        *,
        stream: bool,
    ) -> dict[str, Any]:
        params = request_params(
            messages,
            options,
            model=self.model,
            structured_mode=self.structured_output,
            author_names=self.author_names,
            max_tokens_field=self.max_tokens_field,
            refused=refused,
        )
        if self._omit_auth:
            params["extra_headers"] = {"Authorization": openai.Omit()}
        if stream:
            params["stream"] = True
            if "tool_stream" in refused and "tool_stream" in features_used(params):
                del params["stream"]
            elif self.stream_usage:
                params["stream_options"] = {"include_usage": True}
        return params

    async def _create(
        self,
        messages: Sequence[Message],
        options: ChatOptions,
        token: CancellationToken | None,
        *,
        stream: bool,
    ) -> Any:
        """One completion (or an opened stream and its first chunk); a refused feature is
        retried with its fallback.

        A request with a feature not yet seen to work goes without the SDK's retries, so a
        refusal costs one request, not three; any other failure of it is sent again with them.
        """
        tried: set[Feature] = set()
        first: openai.APIStatusError | None = None
        probing = self.max_retries > 0
        while True:
            params = self._params(messages, options, self._refused | tried, stream=stream)
            used = features_used(params)
            sdk = self._sdk()
            no_retries = probing and any(f not in self._confirmed for f in used)
            if no_retries:
                sdk = sdk.with_options(max_retries=0)
            _log_request(self, params, used)
            try:
                result = await await_cancellable(sdk.chat.completions.create(**params), token)
                if params.get("stream"):
                    result = await _opened(result, token)
            except (openai.APIStatusError, _EmptyStream) as exc:
                if isinstance(exc, _EmptyStream):
                    # llama.cpp's server fails a feature inside an HTTP 200 stream and leaves
                    # the connection broken: the next attempt starts with fresh connections
                    await self.close()
                feature = self._fallback(exc, [f for f in used if f not in tried])
                if feature is not None:
                    first = first or (exc if isinstance(exc, openai.APIStatusError) else None)
                    tried.add(feature)
                elif no_retries and _retryable(exc):
                    probing = False
                else:
                    raise self._failure(exc, first, params, tried) from None
            except openai.APIConnectionError as exc:
                if not no_retries:
                    raise self._error(exc, params, tried) from exc
                probing = False
            except openai.OpenAIError as exc:
                raise self._error(exc, params, tried) from exc
            else:
                self._remember(tried, used)
                return result

    def _fallback(
        self, exc: openai.APIStatusError | _EmptyStream, untried: list[Feature]
    ) -> Feature | None:
        if not self.fallbacks:
            return None
        if isinstance(exc, _EmptyStream):
            return untried[0] if untried else None
        return refused_feature(exc, untried)

    def _failure(
        self,
        exc: openai.APIStatusError | _EmptyStream,
        first: openai.APIStatusError | None,
        params: dict[str, Any],
        tried: set[Feature],
    ) -> Exception:
        status_error = first or (exc if isinstance(exc, openai.APIStatusError) else None)
        if status_error is not None:  # the first refusal says most about what went wrong
            error = self._error(status_error, params, tried)
            error.__cause__ = status_error
            return error
        used = features_used(params)
        return ModelError(
            f"model {params['model']!r} at {self.base_url} ended the stream without an answer; "
            "check the server's log" + (f" (it may lack {', '.join(used)})" if used else "")
        )

    def _remember(self, refused: set[Feature], worked: list[Feature]) -> None:
        for feature in sorted(refused - self._refused):
            _log.warning(
                "%r refused %s; using %s for the rest of this client's life",
                self,
                feature,
                FEATURE_FALLBACKS[feature],
            )
        self._refused |= refused
        self._confirmed.update(worked)

    def _error(
        self, exc: openai.OpenAIError, params: dict[str, Any], tried: set[Feature]
    ) -> CantataError:
        return map_openai_error(
            exc,
            model=params["model"],
            base_url=self.base_url,
            key_source=self._key_source,
            features=[] if self.fallbacks else features_used(params),
            tried=sorted(tried),
        )

    async def get_response(
        self,
        messages: Sequence[Message],
        *,
        options: ChatOptions | None = None,
        cancellation_token: CancellationToken | None = None,
    ) -> ChatResponse:
        """Send the conversation and wait for the whole answer."""
        messages, merged = self._prepare(messages, options)
        completion = await self._create(messages, merged, cancellation_token, stream=False)
        return _to_response(completion, merged)

    async def get_streaming_response(
        self,
        messages: Sequence[Message],
        *,
        options: ChatOptions | None = None,
        cancellation_token: CancellationToken | None = None,
    ) -> AsyncIterator[ChatResponseUpdate]:
        """Stream the answer: text as it comes, each tool call once its arguments are whole."""
        messages, merged = self._prepare(messages, options)
        opened = await self._create(messages, merged, cancellation_token, stream=True)
        if not isinstance(opened, _Opened):  # the server cannot stream this: one whole answer
            for update in _whole_updates(opened):
                yield update
            return
        try:
            async for update in _updates(opened, cancellation_token):
                yield update
        except openai.OpenAIError as exc:
            raise map_openai_error(
                exc,
                model=merged.model or self.model,
                base_url=self.base_url,
                key_source=self._key_source,
            ) from exc
        finally:
            await opened.stream.close()


def _api_key(explicit: str | None, variables: Sequence[str]) -> tuple[str | None, KeySource]:
    if explicit:
        return explicit, "api_key="
    for name in variables:
        if os.environ.get(name):
            return os.environ[name], name
    return None, None


def _check_settings(
    timeout: float, max_retries: int, structured_output: str, max_tokens_field: str
) -> None:
    problems = []
    if not isinstance(timeout, int | float) or not 0 < timeout < math.inf:
        problems.append(f"timeout= must be a number of seconds above 0, got {timeout!r}")
    if not isinstance(max_retries, int) or max_retries < 0:
        problems.append(f"max_retries= must be a whole number from 0, got {max_retries!r}")
    if structured_output not in get_args(StructuredOutputMode):
        problems.append(
            f"structured_output= must be one of {get_args(StructuredOutputMode)}, "
            f"got {structured_output!r}"
        )
    if max_tokens_field not in get_args(MaxTokensField):
        problems.append(
            f"max_tokens_field= must be one of {get_args(MaxTokensField)}, got {max_tokens_field!r}"
        )
    if problems:
        raise ConfigurationError("OpenAIChatClient: " + "; ".join(problems))


def _check_base_url(base_url: str | None) -> str:
    """The base URL without a trailing slash; OpenAI's when None, an error when unusable."""
    if base_url is None:
        return _OPENAI_URL
    url = base_url.strip()
    if not url:
        raise ConfigurationError(
            "base_url= is empty; give the server's URL (e.g. http://127.0.0.1:8080/v1), "
            "or leave base_url= out to use OpenAI"
        )
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port  # noqa: B018 -- parsing the port is what checks it
    except ValueError as exc:
        raise ConfigurationError(
            f"base_url= {url!r} is not a valid URL ({exc}); give one like http://127.0.0.1:8080/v1"
        ) from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigurationError(
            f"base_url= {url!r} is not an http(s) URL with a host; give one like "
            "http://127.0.0.1:8080/v1"
        )
    return url.rstrip("/")


def _log_request(client: OpenAIChatClient, params: dict[str, Any], used: list[Feature]) -> None:
    if not _log.isEnabledFor(logging.DEBUG):
        return
    _log.debug(
        "request to %r: model=%s messages=%d tools=%d stream=%s features=%s",
        client,
        params["model"],
        len(params["messages"]),
        len(params.get("tools", ())),
        bool(params.get("stream")),
        ",".join(used) or "-",
    )


def _to_response(completion: Any, options: ChatOptions) -> ChatResponse:
    if not completion.choices:
        message = Message("assistant", [])
        finish = None
    else:
        choice = completion.choices[0]
        message = Message("assistant", _message_contents(choice.message))
        finish = choice.finish_reason
    response = ChatResponse(
        [message],
        usage=usage_from(completion.usage),
        finish_reason=finish,
        model=completion.model,
        response_id=completion.id,
    )
    if options.response_format is not None and not response.function_calls:
        response.value = parse_structured(response.text, options.response_format)
    return response


def _message_contents(sdk_message: Any) -> list[Content]:
    contents: list[Content] = []
    text = sdk_message.content or getattr(sdk_message, "refusal", None)
    if text:
        contents.append(TextContent(text))
    for call in sdk_message.tool_calls or []:
        function = getattr(call, "function", None)
        if function is None:
            continue
        contents.append(
            FunctionCallContent(
                call.id or f"call_{new_id()[:12]}",
                function.name,
                parse_arguments(function.arguments),
            )
        )
    return contents


class _Stream:
    """The state of one streamed answer: its ids and the tool calls being assembled."""

    def __init__(self) -> None:
        self.assembler = ToolCallAssembler()
        self.message_id = new_id()
        self.response_id: str | None = None
        self.model: str | None = None
        self.finish: str | None = None

    def update(self, contents: list[Content], finish: str | None = None) -> ChatResponseUpdate:
        return ChatResponseUpdate(
            contents,
            message_id=self.message_id,
            finish_reason=finish,
            model=self.model,
            response_id=self.response_id,
        )

    def on_chunk(self, chunk: Any) -> list[ChatResponseUpdate]:
        self.response_id = chunk.id or self.response_id
        self.model = chunk.model or self.model
        out: list[ChatResponseUpdate] = []
        usage = usage_from(getattr(chunk, "usage", None))
        if usage is not None:
            out.append(self.update([UsageContent(usage)]))
        for choice in chunk.choices[:1]:
            delta = choice.delta
            if delta.content:
                out.append(self.update([TextContent(delta.content)]))
            for tc in delta.tool_calls or []:
                function = tc.function
                done = self.assembler.add(
                    tc.index,
                    call_id=tc.id,
                    name=function.name if function else None,
                    arguments=function.arguments if function else None,
                )
                if done:
                    out.append(self.update(list(done)))
            if choice.finish_reason:
                self.finish = choice.finish_reason
                out.extend(self.end_calls())
        return out

    def end_calls(self) -> list[ChatResponseUpdate]:
        rest = self.assembler.finish()
        return [self.update(list(rest))] if rest else []


def _whole_updates(completion: Any) -> list[ChatResponseUpdate]:
    state = _Stream()
    state.response_id, state.model = completion.id, completion.model
    updates: list[ChatResponseUpdate] = []
    usage = usage_from(completion.usage)
    if usage is not None:
        updates.append(state.update([UsageContent(usage)]))
    finish = None
    if completion.choices:
        choice = completion.choices[0]
        updates.append(state.update(_message_contents(choice.message)))
        finish = choice.finish_reason
    updates.append(state.update([], finish))
    return updates


def _retryable(exc: openai.APIStatusError | _EmptyStream) -> bool:
    """What the SDK retries: timeouts, conflicts, rate limits and server errors."""
    if isinstance(exc, _EmptyStream):
        return False
    return exc.status_code in (408, 409, 429) or exc.status_code >= 500


class _EmptyStream(Exception):
    """A stream that ended before its first chunk."""


@dataclass(slots=True)
class _Opened:
    """A stream whose first chunk has arrived (so a stream that fails at once can be retried)."""

    stream: Any
    iterator: Any
    first: Any


async def _opened(stream: Any, token: CancellationToken | None) -> _Opened:
    iterator = stream.__aiter__()
    try:
        first = await await_cancellable(iterator.__anext__(), token)
    except BaseException as exc:
        await stream.close()
        if isinstance(exc, StopAsyncIteration):
            raise _EmptyStream from None
        raise
    return _Opened(stream, iterator, first)


async def _updates(
    opened: _Opened, token: CancellationToken | None
) -> AsyncIterator[ChatResponseUpdate]:
    state = _Stream()
    chunk = opened.first
    while True:
        for update in state.on_chunk(chunk):
            yield update
        try:
            chunk = await await_cancellable(opened.iterator.__anext__(), token)
        except StopAsyncIteration:
            break
    for update in state.end_calls():
        yield update
    yield state.update([], state.finish)
