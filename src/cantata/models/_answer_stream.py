"""Stream the text of a ``{"answer": "..."}`` reply while the model is still writing it."""

from __future__ import annotations

import json
import re

_OPENING = re.compile(r'\s*\{\s*"answer"\s*:\s*"')


class AnswerStream:
    """Fed the raw envelope text piece by piece; hands back decoded answer text as it becomes
    certain. Gives nothing for a tool call (or a non-string answer): that is read whole."""

    def __init__(self) -> None:
        self._raw = ""
        self._start: int | None = None
        self._sent = 0
        self._closed = False

    def feed(self, piece: str) -> str:
        """Add generated text; returns the answer text that is new and complete."""
        self._raw += piece
        if self._closed:
            return ""
        if self._start is None:
            match = _OPENING.match(self._raw)
            if match is None:
                return ""
            self._start = match.end()
        body = self._raw[self._start :]
        end = _string_end(body)
        if end is not None:
            self._closed = True
            body = body[:end]
        else:
            body = _safe_prefix(body)
        text: str = json.loads('"' + body + '"')
        new, self._sent = text[self._sent :], len(text)
        return new

    @property
    def in_answer(self) -> bool:
        """True once the reply is known to be a text answer."""
        return self._start is not None

    @property
    def text(self) -> str:
        """All the raw text fed so far."""
        return self._raw


def _string_end(body: str) -> int | None:
    """Index of the unescaped closing quote of a JSON string body, if it is there."""
    i = 0
    while i < len(body):
        ch = body[i]
        if ch == "\\":
            i += 2
            continue
        if ch == '"':
            return i
        i += 1
    return None


def _safe_prefix(body: str) -> str:
    """The longest prefix that does not end inside an escape sequence or a surrogate pair."""
    i = 0
    last_safe = 0
    while i < len(body):
        if body[i] == "\\":
            size = _escape_size(body, i)
            if i + size > len(body):
                break
            i += size
        else:
            i += 1
        last_safe = i
    return body[:last_safe]


def _escape_size(body: str, i: int) -> int:
    if body[i + 1 : i + 2] != "u":
        return 2
    # A high surrogate escape only makes a character together with the low one after it.
    return 12 if body[i + 2 : i + 4].lower() in ("d8", "d9", "da", "db") else 6
