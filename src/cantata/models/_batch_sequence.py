"""One request inside the batched decoder: its tokens, its limits and the text it streams.

The text side mirrors llama-cpp-python's streamed completion: bytes are decoded as UTF-8 once
a character is whole, and text that could be the start of a stop string is held back until
the next tokens show whether it is one, so a stop string never reaches the caller.
"""

from __future__ import annotations

import codecs
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ._local_render import StopCheck


@dataclass(slots=True)
class Generation:
    """The outcome of one generation."""

    text: str = ""
    finish_reason: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    stopped: bool = False
    grammar_checks: tuple[int, int] = (0, 0)
    """Tokens whose grammar check needed only the likeliest candidates, and the whole vocabulary."""


class StopText:
    """Decodes a sequence's bytes into text, cut at the first stop string."""

    def __init__(self, stops: list[str]) -> None:
        self._stops = [s for s in stops if s]
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="ignore")
        self._text = ""
        self._sent = 0
        self.stopped = False

    def feed(self, data: bytes) -> str:
        """Add a token's bytes; returns the text that is now certain (nothing after a stop)."""
        if self.stopped:
            return ""
        self._text += self._decoder.decode(data)
        unsent = self._text[self._sent :]
        cut = min((i for i in (unsent.find(s) for s in self._stops) if i >= 0), default=-1)
        if cut >= 0:
            self.stopped = True
            self._text = self._text[: self._sent + cut]
            return self._release(len(self._text))
        return self._release(len(self._text) - self._held(unsent))

    def finish(self) -> str:
        """The text still held back, once no more tokens will come."""
        if not self.stopped:
            self._text += self._decoder.decode(b"", final=True)
        return self._release(len(self._text))

    @property
    def text(self) -> str:
        """The whole text so far, stop string excluded."""
        return self._text

    def _held(self, unsent: str) -> int:
        """Length of the longest end of `unsent` that begins some stop string."""
        held = 0
        for stop in self._stops:
            for n in range(min(len(stop) - 1, len(unsent)), held, -1):
                if unsent.endswith(stop[:n]):
                    held = n
                    break
        return held

    def _release(self, end: int) -> str:
        piece = self._text[self._sent : end]
        self._sent = max(self._sent, end)
        return piece


@dataclass(eq=False)
class Sequence:
    """A request as the decoder sees it. Set `cancel` from any thread to end it early."""

    prompt: list[int]
    max_tokens: int
    stop: StopText
    make_chain: Callable[[], Any]
    """Builds the sampler chain on the decoder thread (grammar parsing can fail there)."""
    on_text: Callable[[str], object]
    on_end: Callable[[Generation | None, BaseException | None], object]
    criteria: StopCheck | None = None
    cancel: threading.Event = field(default_factory=threading.Event)
    # decoder state
    chain: Any = None
    slot: int = -1
    n_past: int = 0
    """Tokens of this sequence already in the KV cache."""
    completion: list[int] = field(default_factory=list)
    next_token: int | None = None
    """Sampled, not yet evaluated."""
    finish_reason: str | None = None
    grammar_checks: tuple[int, int] = (0, 0)
    _ids: Any = field(default=None, init=False, repr=False)
    """The prompt and completion as one token array, for `criteria` (filled as they grow)."""
    _filled: int = field(default=0, init=False, repr=False)

    @property
    def prefilling(self) -> bool:
        return self.n_past < len(self.prompt)

    def evaluated(self) -> list[int]:
        """The tokens whose keys and values this sequence has put in the cache."""
        return (self.prompt + self.completion)[: self.n_past]

    def evaluated_ids(self) -> Any:
        """`evaluated()` as a NumPy array (what llama-cpp-python's stopping criteria take),
        without copying the whole conversation for every token."""
        ids = self._ids
        if ids is None:
            import numpy as np  # a dependency of llama-cpp-python

            ids = self._ids = np.empty(len(self.prompt) + self.max_tokens + 1, dtype=np.intc)
            ids[: len(self.prompt)] = self.prompt
            self._filled = len(self.prompt)
        end = len(self.prompt) + len(self.completion)
        if self._filled < end:
            ids[self._filled : end] = self.completion[self._filled - len(self.prompt) :]
            self._filled = end
        return ids[: self.n_past]

    def result(self, *, stopped: bool = False) -> Generation:
        return Generation(
            self.stop.text,
            self.finish_reason,
            len(self.prompt),
            len(self.completion),
            stopped,
            self.grammar_checks,
        )
