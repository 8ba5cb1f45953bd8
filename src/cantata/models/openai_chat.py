"""`OpenAIChatClient`: any server that speaks the OpenAI Chat Completions API.

Built on the official `openai` SDK, which brings retries (with back-off) and timeouts;
this module maps messages, tools and structured output onto the wire format, assembles
streamed tool calls, and turns SDK errors into cantata's hierarchy.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Sequence
from typing import Any, Literal

import openai
from openai import AsyncOpenAI

from ..core import (
    CancellationToken,
    ConfigurationError,
    Content,
    FunctionCallContent,
    Message,
    TextContent,
    UsageContent,
    new_id,
)
from ._cancellable import await_cancellable
from ._errors import map_openai_error
from ._openai_mapping import parse_arguments, request_params, usage_from
from ._tool_call_assembly import ToolCallAssembler
from .guard import check_model_requests_allowed
from .types import ChatOptions, ChatResponse, ChatResponseUpdate, parse_structured

__all__ = ["MaxTokensField", "OpenAIChatClient", "StructuredOutputMode"]

MaxTokensField = Literal["max_tokens", "max_completion_tokens"]
"""The request field that carries `ChatOptions.max_tokens`."""
StructuredOutputMode = Literal["json_schema", "json_object"]
"""How `response_format` goes on the wire: OpenAI's ``json_schema`` (OpenAI, Azure, vLLM,
Ollama), or ``json_object`` with a ``schema`` field (llama.cpp's server)."""

_LOCAL_PLACEHOLDER_KEY = "not-needed"
_OPENAI_URL = "https://api.openai.com/v1"


class OpenAIChatClient:
    """A chat client for OpenAI and every OpenAI-compatible server.

    ``OpenAIChatClient("gpt-4o-mini")`` talks to OpenAI with ``OPENAI_API_KEY``;
    ``OpenAIChatClient("qwen2.5", base_url="http://127.0.0.1:11434/v1")`` talks to a local
    server, which needs no key. Retries and timeouts are the SDK's (`max_retries`,
    `timeout`); errors arrive as `ModelHTTPError`, `ModelError` or cantata's `TimeoutError`.
    Azure OpenAI works through its v1 endpoint as `base_url` with its key.

    `structured_output` picks how `response_format` is sent (see `StructuredOutputMode`);
    `stream_usage` asks for token usage at the end of streams; `author_names` sends each
    message's `author_name` as the wire ``name``; `max_tokens_field` is
    ``"max_completion_tokens"`` for OpenAI's reasoning models, which refuse ``max_tokens``;
    `default_options` apply to every request.
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
    ) -> None:
        if not model:
            raise ConfigurationError("OpenAIChatClient needs a model name, e.g. 'gpt-4o-mini'")
        key = api_key or os.environ.get("OPENAI_API_KEY")
        if not key:
            if base_url is None:
                raise ConfigurationError(
                    f"OpenAIChatClient for model {model!r} on OpenAI needs an API key: set "
                    "OPENAI_API_KEY or pass api_key=, or pass base_url= for a local server"
                )
            key = _LOCAL_PLACEHOLDER_KEY
        self.model = model
        self.base_url = (base_url or _OPENAI_URL).rstrip("/")
        self.timeout = timeout
        self.max_retries = max_retries
        self.default_options = default_options or ChatOptions()
        self.structured_output: StructuredOutputMode = structured_output
        self.stream_usage = stream_usage
        self.author_names = author_names
        self.max_tokens_field: MaxTokensField = max_tokens_field
        self._api_key = key
        self._headers = dict(default_headers or {})
        self._clients: dict[asyncio.AbstractEventLoop, AsyncOpenAI] = {}

    def __repr__(self) -> str:
        return f"OpenAIChatClient(model={self.model!r}, base_url={self.base_url!r})"

    def _sdk(self) -> AsyncOpenAI:
        # One SDK client per event loop: its HTTP connection pool belongs to the loop.
        loop = asyncio.get_running_loop()
        client = self._clients.get(loop)
        if client is None:
            for old in [lp for lp in self._clients if lp.is_closed()]:
                del self._clients[old]
            client = AsyncOpenAI(
                api_key=self._api_key,
                base_url=self.base_url,
                timeout=self.timeout,
                max_retries=self.max_retries,
                default_headers=self._headers or None,
            )
            self._clients[loop] = client
        return client

    async def aclose(self) -> None:
        """Close the HTTP connections of the current event loop."""
        client = self._clients.pop(asyncio.get_running_loop(), None)
        if client is not None:
            await client.close()

    def _prepare(
        self, messages: Sequence[Message], options: ChatOptions | None
    ) -> tuple[dict[str, Any], ChatOptions]:
        check_model_requests_allowed("OpenAIChatClient")
        merged = self.default_options.merge(options)
        params = request_params(
            messages,
            merged,
            model=self.model,
            structured_mode=self.structured_output,
            author_names=self.author_names,
            max_tokens_field=self.max_tokens_field,
        )
        return params, merged

    async def get_response(
        self,
        messages: Sequence[Message],
        *,
        options: ChatOptions | None = None,
        cancellation_token: CancellationToken | None = None,
    ) -> ChatResponse:
        """Send the conversation and wait for the whole answer."""
        params, merged = self._prepare(messages, options)
        try:
            completion = await await_cancellable(
                self._sdk().chat.completions.create(**params), cancellation_token
            )
        except openai.OpenAIError as exc:
            raise map_openai_error(exc, model=params["model"], base_url=self.base_url) from exc
        return _to_response(completion, merged)

    async def get_streaming_response(
        self,
        messages: Sequence[Message],
        *,
        options: ChatOptions | None = None,
        cancellation_token: CancellationToken | None = None,
    ) -> AsyncIterator[ChatResponseUpdate]:
        """Stream the answer: text as it comes, each tool call once its arguments are whole."""
        params, _ = self._prepare(messages, options)
        if self.stream_usage:
            params["stream_options"] = {"include_usage": True}
        model = params["model"]
        try:
            stream = await await_cancellable(
                self._sdk().chat.completions.create(stream=True, **params), cancellation_token
            )
            try:
                async for update in _updates(stream, cancellation_token):
                    yield update
            finally:
                await stream.close()
        except openai.OpenAIError as exc:
            raise map_openai_error(exc, model=model, base_url=self.base_url) from exc


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


async def _updates(
    stream: Any, token: CancellationToken | None
) -> AsyncIterator[ChatResponseUpdate]:
    state = _Stream()
    iterator = stream.__aiter__()
    while True:
        try:
            chunk = await await_cancellable(iterator.__anext__(), token)
        except StopAsyncIteration:
            break
        for update in state.on_chunk(chunk):
            yield update
    for update in state.end_calls():
        yield update
    yield state.update([], state.finish)
