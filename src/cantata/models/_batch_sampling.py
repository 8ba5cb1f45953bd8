"""Per-sequence sampling for the batched decoder: the settings a request may carry, and the
llama.cpp sampler chain built from them.

The chain is the one ``Llama.create_chat_completion`` builds (penalties, grammar, then greedy
at temperature 0 or top-k, typical, top-p, min-p, temperature and a seeded draw), so a request
samples the same tokens whichever path runs it (the grammar is checked on the likeliest
tokens first, which picks the same token; see `SequenceSampler`). Each sequence owns its
chain, so grammar state, penalties and the random draw never leak between concurrent
requests.
"""

from __future__ import annotations

import ctypes
import math
from dataclasses import dataclass, field
from typing import Any

from ..core import ConfigurationError, ModelError

DEFAULT_TEMPERATURE = 0.2
PENALTY_LAST_N = 64

_FLOAT_KNOBS = {
    "top_p": 0.95,
    "min_p": 0.05,
    "typical_p": 1.0,
    "repeat_penalty": 1.0,
    "presence_penalty": 0.0,
    "frequency_penalty": 0.0,
    "mirostat_tau": 5.0,
    "mirostat_eta": 0.1,
    "tfs_z": 1.0,  # accepted for compatibility; llama.cpp no longer has tail-free sampling
}
_INT_KNOBS = {"top_k": 40, "mirostat_mode": 0}
KNOBS = frozenset({*_FLOAT_KNOBS, *_INT_KNOBS, "logit_bias"})
"""The names `ChatOptions.extra` may carry for the local model."""


@dataclass(frozen=True, slots=True)
class Sampling:
    """How one sequence picks its tokens."""

    temperature: float = DEFAULT_TEMPERATURE
    seed: int | None = None
    floats: dict[str, float] = field(default_factory=dict)
    ints: dict[str, int] = field(default_factory=dict)
    logit_bias: dict[int, float] = field(default_factory=dict)

    def float_(self, name: str) -> float:
        return self.floats.get(name, _FLOAT_KNOBS[name])

    def int_(self, name: str) -> int:
        return self.ints.get(name, _INT_KNOBS[name])


def sampling_from(
    *, temperature: float | None, top_p: float | None, seed: int | None, extra: dict[str, Any]
) -> Sampling:
    """Check a request's sampling settings; an unknown or malformed one is a ConfigurationError."""
    unknown = sorted(set(extra) - KNOBS)
    if unknown:
        raise ConfigurationError(
            f"LocalChatClient does not take the option(s) {unknown} in ChatOptions.extra; "
            f"remove them, or use one of {sorted(KNOBS)}"
        )
    floats = {k: _number(k, v) for k, v in extra.items() if k in _FLOAT_KNOBS}
    if top_p is not None:
        floats["top_p"] = _number("top_p", top_p)
    ints = {k: int(_number(k, v)) for k, v in extra.items() if k in _INT_KNOBS}
    temp = DEFAULT_TEMPERATURE if temperature is None else _number("temperature", temperature)
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise ConfigurationError(f"seed must be an integer, not {seed!r}")
    return Sampling(temp, seed, floats, ints, _logit_bias(extra.get("logit_bias")))


def _number(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ConfigurationError(
            f"the sampling option {name!r} must be a finite number, not {value!r}"
        )
    return float(value)


def _logit_bias(raw: Any) -> dict[int, float]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ConfigurationError(f"logit_bias must map token ids to biases, not {raw!r}")
    try:
        return {int(k): _number("logit_bias", v) for k, v in raw.items()}
    except (TypeError, ValueError):
        raise ConfigurationError(
            f"logit_bias keys must be token ids (integers), got {sorted(map(str, raw))[:5]}"
        ) from None


_FIRST_LOOK = 128
"""How many of the likeliest tokens the grammar checks before it checks the whole vocabulary
(0: always the whole vocabulary, as llama.cpp's own chain does)."""


def build_chain(llama: Any, sampling: Sampling, *, grammar: Any, seed: int) -> SequenceSampler:
    """A new sampler for one sequence (the caller closes it)."""
    return SequenceSampler(llama, sampling, grammar=grammar, seed=seed, first_look=_FIRST_LOOK)


class SequenceSampler:
    """One sequence's sampler chain, with its grammar checked on the likeliest tokens first.

    Checking a grammar costs per candidate token, and llama.cpp's chain checks the whole
    vocabulary (49152 tokens for SmolLM2) before every token: about 6 ms of CPU a token
    here, nearly what decoding the token costs (7.5 ms on one thread). When the choice
    after the grammar is among the `top_k` likeliest valid tokens (greedy: the likeliest
    one), checking the `first_look` likeliest tokens first gives the same token whenever at
    least `top_k` of them pass, because every valid token left unchecked is less likely
    than those. Otherwise (and for mirostat, or a draw from the whole distribution) the
    whole vocabulary is checked, as in llama.cpp's chain. Exact ties in logits may be
    ordered differently, as between any two sorts of them.
    `checked_few` and `checked_all` count how often each happened.
    """

    def __init__(
        self, llama: Any, sampling: Sampling, *, grammar: Any, seed: int, first_look: int
    ) -> None:
        import llama_cpp
        import numpy as np  # a dependency of llama-cpp-python
        from llama_cpp import _internals

        self._lib = llama_cpp
        self._np = np
        self.n_vocab = n_vocab = int(llama.n_vocab())
        self._grammar: Any = None
        self._look: Any = None
        self._tail: Any = None
        self.checked_few = self.checked_all = 0
        self._argmax = False
        s = sampling
        self._head: Any = _internals.LlamaSampler()  # type: ignore[no-untyped-call]
        head = self._head
        try:
            if s.logit_bias:
                head.add_logit_bias(n_vocab, s.logit_bias)
            head.add_penalties(
                n_vocab,
                PENALTY_LAST_N,
                s.float_("repeat_penalty"),
                s.float_("frequency_penalty"),
                s.float_("presence_penalty"),
            )
            if grammar is None:
                _add_choice(head, s, n_vocab, seed)
                self._argmax = _plain_greedy(s)
                return
            self._grammar = llama_cpp.llama_sampler_init_grammar(
                llama._model.vocab, grammar._grammar.encode("utf-8"), grammar._root.encode("utf-8")
            )
            if not self._grammar:
                raise ConfigurationError(
                    "llama.cpp could not parse the grammar made from the tool or response "
                    "schema; simplify the schema"
                )
            self._tail = _internals.LlamaSampler()  # type: ignore[no-untyped-call]
            _add_choice(self._tail, s, n_vocab, seed)
            self._need = _needed(s)
            if 0 < self._need < first_look < n_vocab:
                self._look = llama_cpp.llama_sampler_init_top_k(first_look)
            self._candidates = _candidates(n_vocab)
            self._array = llama_cpp.llama_token_data_array(
                data=self._candidates.ctypes.data_as(ctypes.POINTER(llama_cpp.llama_token_data)),
                size=n_vocab,
                selected=-1,
                sorted=False,
            )
        except BaseException:
            self.close()
            raise

    def sample(self, ctx: Any, index: int) -> int:
        """Pick the token after output `index` of the last decode, and accept it."""
        lib = self._lib
        if self._grammar is None:
            if not self._argmax:
                return int(lib.llama_sampler_sample(self._head.sampler, ctx, index))
            logits = lib.llama_get_logits_ith(ctx, index)
            token = int(self._np.ctypeslib.as_array(logits, shape=(self.n_vocab,)).argmax())
            lib.llama_sampler_accept(self._head.sampler, token)
            return token
        logits = lib.llama_get_logits_ith(ctx, index)
        array = self._refill(logits)
        if self._look is not None:
            lib.llama_sampler_apply(self._look, array)  # the likeliest, sorted
            lib.llama_sampler_apply(self._grammar, array)
            size = self._array.size
            np = self._np
            passed = np.count_nonzero(self._candidates["logit"][:size] != -np.inf)
            if passed >= self._need:
                self.checked_few += 1
                self._array.sorted = False  # the grammar put -inf among them
                return self._choose(array)
            array = self._refill(logits)
        self.checked_all += 1
        lib.llama_sampler_apply(self._grammar, array)
        return self._choose(array)

    def _refill(self, logits: Any) -> Any:
        """All the tokens with the model's logits, after the biases and penalties."""
        candidates = self._candidates
        candidates["id"] = _ids(self.n_vocab)
        candidates["logit"] = self._np.ctypeslib.as_array(logits, shape=(self.n_vocab,))
        candidates["p"] = 0.0
        array = self._array
        array.size, array.selected, array.sorted = self.n_vocab, -1, False
        ref = ctypes.byref(array)
        self._lib.llama_sampler_apply(self._head.sampler, ref)
        return ref

    def _choose(self, array: Any) -> int:
        lib = self._lib
        lib.llama_sampler_apply(self._tail.sampler, array)
        selected = self._array.selected
        if not 0 <= selected < self._array.size:
            raise ModelError(f"llama.cpp's sampler selected no token (index {selected})")
        token = int(self._candidates["id"][selected])
        lib.llama_sampler_accept(self._head.sampler, token)
        lib.llama_sampler_accept(self._grammar, token)
        lib.llama_sampler_accept(self._tail.sampler, token)
        return token

    def close(self) -> None:
        """Free the llama.cpp samplers (idempotent)."""
        for chain in (self._head, self._tail):
            if chain is not None:
                chain.close()
        self._head = self._tail = None
        for sampler in (self._grammar, self._look):
            if sampler:
                self._lib.llama_sampler_free(sampler)
        self._grammar = self._look = None


def _plain_greedy(s: Sampling) -> bool:
    """Whether the chain is greedy on the raw logits (no bias, penalties that change nothing):
    then the first largest logit is its token, found without copying the vocabulary (llama.cpp's
    greedy sampler also takes the first of equal logits)."""
    no_penalty = (
        s.float_("repeat_penalty") == 1.0
        and s.float_("frequency_penalty") == 0.0
        and s.float_("presence_penalty") == 0.0
    )
    return s.temperature == 0.0 and not s.logit_bias and no_penalty


def _needed(s: Sampling) -> int:
    """How many valid tokens the choice looks at: 1 greedy, top_k, or 0 for all of them."""
    if s.temperature == 0.0:
        return 1
    if s.temperature < 0.0 or s.int_("mirostat_mode") in (1, 2):
        return 0
    return max(s.int_("top_k"), 0)


_ids_by_size: dict[int, Any] = {}


def _candidates(n_vocab: int) -> Any:
    """A buffer laid out as llama.cpp's `llama_token_data` array."""
    import numpy as np

    layout = np.dtype([("id", np.int32), ("logit", np.float32), ("p", np.float32)])
    return np.zeros(n_vocab, dtype=layout)


def _ids(n_vocab: int) -> Any:
    ids = _ids_by_size.get(n_vocab)
    if ids is None:
        import numpy as np

        ids = _ids_by_size[n_vocab] = np.arange(n_vocab, dtype=np.int32)
    return ids


def _add_choice(chain: Any, s: Sampling, n_vocab: int, seed: int) -> None:
    temp = s.temperature
    if temp < 0.0:
        chain.add_dist(seed)
    elif temp == 0.0:
        chain.add_greedy()
    elif s.int_("mirostat_mode") == 1:
        chain.add_mirostat(n_vocab, seed, s.float_("mirostat_tau"), s.float_("mirostat_eta"), 100)
    elif s.int_("mirostat_mode") == 2:
        chain.add_mirostat_v2(seed, s.float_("mirostat_tau"), s.float_("mirostat_eta"))
    else:
        chain.add_top_k(s.int_("top_k"))
        chain.add_typical(s.float_("typical_p"), 1)
        chain.add_top_p(s.float_("top_p"), 1)
        chain.add_min_p(s.float_("min_p"), 1)
        chain.add_temp(temp)
        chain.add_dist(seed)
