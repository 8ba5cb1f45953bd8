"""`AnthropicChatClient`: Claude (and any server speaking the Messages API) through the
official `anthropic` SDK.

The SDK brings retries (429 and 529 among them, after the server's ``retry-after``) and
timeouts; this module maps messages, tools, images and structured output onto the Messages
wire format (`_anthropic_mapping`), places prompt-cache breakpoints, keeps extended-thinking
blocks on the message that carried them, and turns SDK errors into cantata's hierarchy.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
from collections.abc import AsyncIterator, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self, get_args

from ..core import (
    CancellationToken,
    CantataError,
    ConfigurationError,
    Content,
    FunctionCallContent,
    Message,
    ModelConnectionError,
    ModelError,
    ModelHTTPError,
    ModelOutputError,
    TextContent,
    TimeoutError,
    UsageContent,
    new_id,
)
from ._anthropic_mapping import (
    ANSWER_TOOL,
    THINKING_KEY,
    StructuredMode,
    answer_text,
    finish_reason,
    request_params,
    usage_from,
)
from ._cancellable import await_cancellable
from ._errors import parse_retry_after
from ._openai_mapping import parse_arguments
from .guard import check_model_requests_allowed
from .types import ChatOptions, ChatResponse, ChatResponseUpdate, ResponseFormat, parse_structured

if TYPE_CHECKING:
    import anthropic

__all__ = ["ANTHROPIC_KEY_VARIABLES", "THINKING_KEY", "AnthropicChatClient", "StructuredMode"]

ANTHROPIC_KEY_VARIABLES = ("ANTHROPIC_API_KEY",)
"""Environment variables read for the key when none is passed."""

_log = logging.getLogger("cantata.models")
_ANTHROPIC_URL = "https://api.anthropic.com"


def _sdk_module() -> Any:
    try:
        import anthropic
    except ImportError as exc:
        raise ConfigurationError(
            "AnthropicChatClient needs the anthropic SDK: pip install 'cantata[anthropic]'"
        ) from exc
    return anthropic


class AnthropicChatClient:
    """A chat client for Anthropic's Messages API (Claude), or any server that speaks it.

    ``AnthropicChatClient("claude-sonnet-4-5")`` talks to Anthropic with the key in
    ``ANTHROPIC_API_KEY``; `base_url` points it elsewhere (a gateway, llama.cpp's
    ``llama-server``), where no key is needed and none is sent when none is set.

    - `max_tokens`: the answer's limit when a request sets none (the API requires one).
    - `prompt_caching` (on): cache breakpoints at the end of the tools and of the
      instructions, the prefix every turn of a conversation repeats; cache reads and writes
      arrive in `Usage.cached_input_tokens` and `Usage.cache_write_tokens`.
    - `thinking_budget`: turns extended thinking on with that many tokens. Thinking blocks
      are kept in the answer's ``metadata[THINKING_KEY]`` and sent back with that message,
      signature and all, as the API requires within a tool loop.
    - `structured_output`: ``"tool"`` (default; every model and server) gives a
      `response_format` answer through a forced tool whose input is the schema;
      ``"native"`` uses the API's own JSON-schema output (``output_config``, newer models).
    - `parallel_tool_calls` off asks for one tool call at a time.

    Retries and timeouts are the SDK's (`max_retries`, `timeout`); errors arrive as
    `ModelHTTPError` (with `retry_after`), `ModelConnectionError`, cantata's `TimeoutError`
    or `ModelError`. Use it as ``async with`` (or call `close`).
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 2,
        max_tokens: int = 4096,
        default_options: ChatOptions | None = None,
        prompt_caching: bool = True,
        thinking_budget: int | None = None,
        structured_output: StructuredMode = "tool",
        parallel_tool_calls: bool = True,
        default_headers: dict[str, str] | None = None,
        key_variables: Sequence[str] = ANTHROPIC_KEY_VARIABLES,
    ) -> None:
        if not model:
            raise ConfigurationError(
                "AnthropicChatClient needs a model name, e.g. 'claude-sonnet-4-5'"
            )
        key = api_key or next((os.environ[v] for v in key_variables if os.environ.get(v)), None)
        if key is None and base_url is None:
            raise ConfigurationError(
                f"AnthropicChatClient for model {model!r} on Anthropic needs an API key: set "
                "ANTHROPIC_API_KEY or pass api_key=, or pass base_url= for another server"
            )
        _check_settings(timeout, max_retries, max_tokens, thinking_budget, structured_output)
        self.model = model
        self.base_url = (base_url or _ANTHROPIC_URL).rstrip("/")
        self.timeout = timeout
        self.max_retries = max_retries
        self.max_tokens = max_tokens
        self.default_options = default_options or ChatOptions()
        self.prompt_caching = prompt_caching
        self.thinking_budget = thinking_budget
        self.structured_output: StructuredMode = structured_output
        self.parallel_tool_calls = parallel_tool_calls
        self._api_key = key
        self._headers = dict(default_headers or {})
        self._clients: dict[asyncio.AbstractEventLoop, anthropic.AsyncAnthropic] = {}
        _sdk_module()  # a missing SDK fails here, not at the first request

    def __repr__(self) -> str:
        return f"AnthropicChatClient(model={self.model!r}, base_url={self.base_url!r})"

    def _sdk(self) -> anthropic.AsyncAnthropic:
        # One SDK client per event loop: its HTTP connection pool belongs to the loop.
        loop = asyncio.get_running_loop()
        client = self._clients.get(loop)
        if client is None:
            for old in [lp for lp in self._clients if lp.is_closed()]:
                del self._clients[old]
            client = _sdk_module().AsyncAnthropic(
                api_key=self._api_key,
                auth_token=None,
                base_url=self.base_url,
                timeout=self.timeout,
                max_retries=self.max_retries,
                default_headers=self._headers or None,
            )
            self._clients[loop] = client
        return client

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

    def _params(self, messages: Sequence[Message], options: ChatOptions) -> dict[str, Any]:
        params = request_params(
            messages,
            options,
            model=self.model,
            max_tokens=self.max_tokens,
            prompt_caching=self.prompt_caching,
            structured=self.structured_output,
            parallel_tool_calls=self.parallel_tool_calls,
            thinking_budget=self.thinking_budget,
        )
        if self._api_key is None:  # a keyless server: no placeholder key is sent
            omit = _sdk_module().Omit()
            params["extra_headers"] = {"X-Api-Key": omit, "Authorization": omit}
        return params

    async def get_response(
        self,
        messages: Sequence[Message],
        *,
        options: ChatOptions | None = None,
        cancellation_token: CancellationToken | None = None,
    ) -> ChatResponse:
        """Send the conversation and wait for the whole answer."""
        check_model_requests_allowed("AnthropicChatClient")
        merged = self.default_options.merge(options)
        params = self._params(messages, merged)
        _log_request(self, params)
        try:
            answer = await await_cancellable(
                self._sdk().messages.create(**params), cancellation_token
            )
        except Exception as exc:
            raise self._error(exc, params["model"]) from exc
        return _to_response(answer, merged.response_format)

    async def get_streaming_response(
        self,
        messages: Sequence[Message],
        *,
        options: ChatOptions | None = None,
        cancellation_token: CancellationToken | None = None,
    ) -> AsyncIterator[ChatResponseUpdate]:
        """Stream the answer: text as it comes, each tool call once its input is whole."""
        check_model_requests_allowed("AnthropicChatClient")
        merged = self.default_options.merge(options)
        params = self._params(messages, merged)
        _log_request(self, params)
        try:
            stream = await await_cancellable(
                self._sdk().messages.create(**params, stream=True), cancellation_token
            )
        except Exception as exc:
            raise self._error(exc, params["model"]) from exc
        fmt = merged.response_format
        state = _Stream(fmt, hold_text=fmt is not None and self.structured_output == "tool")
        iterator = stream.__aiter__()
        try:
            while True:
                try:
                    event = await await_cancellable(iterator.__anext__(), cancellation_token)
                except StopAsyncIteration:
                    break
                for update in state.on_event(event):
                    yield update
        except CantataError:
            raise
        except Exception as exc:
            raise self._error(exc, params["model"]) from exc
        finally:
            await stream.close()
        for update in state.end():
            yield update

    def _error(self, exc: Exception, model: str) -> Exception:
        if isinstance(exc, CantataError | asyncio.CancelledError):
            return exc
        return map_anthropic_error(
            exc, model=model, base_url=self.base_url, keyed=bool(self._api_key)
        )


def map_anthropic_error(
    exc: BaseException, *, model: str, base_url: str, keyed: bool = True
) -> CantataError:
    """The cantata error that stands for an `anthropic` SDK error."""
    sdk = _sdk_module()
    where = f"model {model!r} at {base_url}"
    if isinstance(exc, sdk.APIStatusError):
        status = exc.status_code
        return ModelHTTPError(
            f"{where} answered HTTP {status}: {_short(exc.message)}{_hint(status, keyed)}",
            status_code=status,
            body=exc.body,
            retry_after=parse_retry_after(exc.response.headers),
        )
    if isinstance(exc, sdk.APITimeoutError):
        return TimeoutError(
            f"request to {where} timed out; raise `timeout=` on the client or check the server"
        )
    if isinstance(exc, sdk.APIConnectionError):
        return ModelConnectionError(
            f"could not connect to {where}: {exc.__cause__ or exc}; "
            "check that the server is running and that base_url= is right"
        )
    if isinstance(exc, sdk.APIResponseValidationError):
        return ModelOutputError(f"{where} sent a response the SDK cannot read: {exc}")
    return ModelError(f"request to {where} failed: {type(exc).__name__}: {exc}")


def _hint(status: int, keyed: bool) -> str:
    if status == 401:
        if not keyed:
            return "; the server wants an API key: set ANTHROPIC_API_KEY or pass api_key="
        return "; the server refused the API key: check it"
    if status == 404:
        return "; check the model name and base_url= (the SDK adds /v1/messages itself)"
    if status == 429:
        return "; the server is rate limiting: wait `retry_after` seconds and retry"
    if status == 529:
        return "; the API is overloaded: wait `retry_after` seconds (or try another model)"
    return ""


def _short(text: str, limit: int = 500) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _check_settings(
    timeout: float,
    max_retries: int,
    max_tokens: int,
    thinking_budget: int | None,
    structured_output: str,
) -> None:
    problems = []
    if not isinstance(timeout, int | float) or not 0 < timeout < math.inf:
        problems.append(f"timeout= must be a number of seconds above 0, got {timeout!r}")
    if not isinstance(max_retries, int) or max_retries < 0:
        problems.append(f"max_retries= must be a whole number from 0, got {max_retries!r}")
    if not isinstance(max_tokens, int) or max_tokens < 1:
        problems.append(f"max_tokens= must be a whole number from 1, got {max_tokens!r}")
    if thinking_budget is not None and (
        not isinstance(thinking_budget, int) or thinking_budget < 1024
    ):
        problems.append(
            f"thinking_budget= must be a whole number of tokens from 1024, got {thinking_budget!r}"
        )
    if structured_output not in get_args(StructuredMode):
        problems.append(
            f"structured_output= must be one of {get_args(StructuredMode)}, "
            f"got {structured_output!r}"
        )
    if problems:
        raise ConfigurationError("AnthropicChatClient: " + "; ".join(problems))


def _log_request(client: AnthropicChatClient, params: dict[str, Any]) -> None:
    if _log.isEnabledFor(logging.DEBUG):
        _log.debug(
            "request to %r: model=%s messages=%d tools=%d",
            client,
            params["model"],
            len(params["messages"]),
            len(params.get("tools", ())),
        )


def _block_contents(
    blocks: Sequence[Any], fmt: ResponseFormat | None
) -> tuple[list[Content], list[dict[str, Any]]]:
    """(contents, thinking blocks with their positions) of an answer's content blocks."""
    contents: list[Content] = []
    thinking: list[dict[str, Any]] = []
    for block in blocks:
        kind = block.type
        if kind == "text" and block.text:
            contents.append(TextContent(block.text))
        elif kind == "tool_use":
            contents.append(_call(block.id, block.name, block.input, fmt))
        elif kind in ("thinking", "redacted_thinking"):
            thinking.append({**block.model_dump(exclude_none=True), "at": len(contents)})
    return contents, thinking


def _call(call_id: str, name: str, arguments: Any, fmt: ResponseFormat | None) -> Content:
    if name == ANSWER_TOOL and fmt is not None:
        return TextContent(answer_text(arguments, fmt))
    args = arguments if isinstance(arguments, dict) else parse_arguments(str(arguments))
    return FunctionCallContent(call_id or f"call_{new_id()[:12]}", name, args)


def _to_response(answer: Any, fmt: ResponseFormat | None) -> ChatResponse:
    contents, thinking = _block_contents(answer.content, fmt)
    metadata = {THINKING_KEY: thinking} if thinking else None
    finish = finish_reason(answer.stop_reason)
    if fmt is not None and any(
        getattr(b, "type", None) == "tool_use" and b.name == ANSWER_TOOL for b in answer.content
    ):
        answer_only: list[Content] = [c for c in contents if type(c) is TextContent]
        contents = answer_only[-1:]  # the answer alone: text beside it is not the answer
        finish = "stop"
    response = ChatResponse(
        [Message("assistant", contents, metadata=metadata)],
        usage=usage_from(answer.usage),
        finish_reason=finish,
        model=answer.model,
        response_id=answer.id,
    )
    if fmt is not None and not response.function_calls:
        response.value = parse_structured(response.text, fmt)
    return response


class _Stream:
    """One streamed answer: blocks being assembled by index, usage, ids."""

    def __init__(self, fmt: ResponseFormat | None, *, hold_text: bool) -> None:
        self.fmt = fmt
        self.hold_text = hold_text  # a structured answer comes through a tool: text is aside
        self.held: str | None = None
        self.message_id = new_id()
        self.response_id: str | None = None
        self.model: str | None = None
        self.finish: str | None = None
        self.usage: Any = None
        self.blocks: dict[int, dict[str, Any]] = {}
        self.thinking: list[dict[str, Any]] = []
        self.sent = 0  # contents streamed so far: the position of the next thinking block
        self.answered = False

    def update(
        self, contents: list[Content], finish: str | None = None, **metadata: Any
    ) -> ChatResponseUpdate:
        return ChatResponseUpdate(
            contents,
            message_id=self.message_id,
            finish_reason=finish,
            model=self.model,
            response_id=self.response_id,
            metadata=metadata or None,
        )

    def on_event(self, event: Any) -> list[ChatResponseUpdate]:
        kind = event.type
        if kind == "message_start":
            message = event.message
            self.response_id, self.model, self.usage = message.id, message.model, message.usage
            return []
        if kind == "content_block_start":
            block = event.content_block
            self.blocks[event.index] = {**block.model_dump(exclude_none=True), "_json": []}
            return []
        if kind == "content_block_delta":
            return self._delta(event.index, event.delta)
        if kind == "content_block_stop":
            return self._stop(event.index)
        if kind == "message_delta":
            self.finish = event.delta.stop_reason or self.finish
            self.usage = _merged_usage(self.usage, event.usage)
        return []

    def _delta(self, index: int, delta: Any) -> list[ChatResponseUpdate]:
        block = self.blocks.get(index)
        if block is None:
            return []
        kind = delta.type
        if kind == "text_delta":
            if self.hold_text:
                block["text"] = block.get("text", "") + delta.text
                return []
            self.sent += 1
            return [self.update([TextContent(delta.text)])] if delta.text else []
        if kind == "input_json_delta":
            block["_json"].append(delta.partial_json)
        elif kind == "thinking_delta":
            block["thinking"] = block.get("thinking", "") + delta.thinking
        elif kind == "signature_delta":
            block["signature"] = block.get("signature", "") + delta.signature
        return []

    def _stop(self, index: int) -> list[ChatResponseUpdate]:
        block = self.blocks.pop(index, None)
        if block is None:
            return []
        raw = "".join(block.pop("_json"))
        kind = block["type"]
        if kind in ("thinking", "redacted_thinking"):
            self.thinking.append({**block, "at": self.sent})
            return []
        if kind == "tool_use":
            arguments = parse_arguments(raw) if raw else block.get("input") or {}
            call = _call(block.get("id", ""), block.get("name", ""), arguments, self.fmt)
            if type(call) is TextContent:
                self.answered = True
            self.sent += 1
            return [self.update([call])]
        if kind == "text" and self.hold_text and block.get("text"):
            self.held = block["text"]
        return []

    def end(self) -> list[ChatResponseUpdate]:
        out: list[ChatResponseUpdate] = []
        usage = usage_from(self.usage)
        if usage is not None:
            out.append(self.update([UsageContent(usage)]))
        if self.held and not self.answered:  # the model answered in text after all
            out.append(self.update([TextContent(self.held)]))
        finish = "stop" if self.answered else finish_reason(self.finish)
        extra = {THINKING_KEY: self.thinking} if self.thinking else {}
        out.append(self.update([], finish, **extra))
        return out


def _merged_usage(start: Any, delta: Any) -> Any:
    """message_start's usage with the counts message_delta reports (cumulative) over it."""
    if delta is None:
        return start
    if start is None:
        return delta
    merged = start.model_dump()
    for key, value in delta.model_dump().items():
        if value is not None:
            merged[key] = value
    return _Usage(merged)


class _Usage:
    def __init__(self, fields: dict[str, Any]) -> None:
        self.__dict__.update(fields)
