"""Per-sequence sampling for the batched decoder: the settings a request may carry, and the
llama.cpp sampler chain built from them.

The chain is the one ``Llama.create_chat_completion`` builds (penalties, grammar, then greedy
at temperature 0 or top-k, typical, top-p, min-p, temperature and a seeded draw), so a request
samples the same tokens whichever path runs it. Each sequence owns its chain, so grammar
state, penalties and the random draw never leak between concurrent requests.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from ..core import ConfigurationError

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


def build_chain(llama: Any, sampling: Sampling, *, grammar: Any, seed: int) -> Any:
    """A new sampler chain for one sequence (the caller closes it)."""
    import llama_cpp
    from llama_cpp import _internals

    chain = _internals.LlamaSampler()  # type: ignore[no-untyped-call]
    n_vocab = llama.n_vocab()
    if sampling.logit_bias:
        chain.add_logit_bias(n_vocab, sampling.logit_bias)
    s = sampling
    chain.add_penalties(
        n_vocab,
        PENALTY_LAST_N,
        s.float_("repeat_penalty"),
        s.float_("frequency_penalty"),
        s.float_("presence_penalty"),
    )
    if grammar is not None:
        vocab = llama._model.vocab
        sampler = llama_cpp.llama_sampler_init_grammar(
            vocab, grammar._grammar.encode("utf-8"), grammar._root.encode("utf-8")
        )
        if not sampler:
            chain.close()  # type: ignore[no-untyped-call]
            raise ConfigurationError(
                "llama.cpp could not parse the grammar made from the tool or response schema; "
                "simplify the schema"
            )
        llama_cpp.llama_sampler_chain_add(chain.sampler, sampler)
    _add_choice(chain, s, n_vocab, seed)
    return chain


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
