"""History reducers: shrink what is sent to the model, never what the thread keeps.

A reducer is applied to the thread's messages before each model request. It must never
separate a tool call from its result: a request that starts with a tool result, or holds a
result whose call was cut away, is rejected by most model servers.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from ..core import (
    AgentError,
    ConfigurationError,
    FunctionApprovalResponseContent,
    Message,
    TextContent,
)
from ..models import ChatClient, ChatOptions

__all__ = ["HistoryReducer", "SummarizingReducer", "TruncatingReducer", "safe_start"]


@runtime_checkable
class HistoryReducer(Protocol):
    """Turns a conversation into the (shorter) list of messages to send to the model."""

    async def reduce(self, messages: Sequence[Message]) -> list[Message]:
        """The messages to send; `messages` itself is left unchanged."""
        ...


def _call_ids(message: Message) -> list[str]:
    ids = [c.call_id for c in message.function_calls]
    for c in message.contents:
        if type(c) is FunctionApprovalResponseContent:
            ids.append(c.function_call.call_id)
    return ids


def safe_start(messages: Sequence[Message], start: int) -> int:
    """The first index >= `start` from which no kept tool result lacks its call.

    Walks the window once; when a result whose call is not in the window shows up, the
    window restarts right after it. Returns ``len(messages)`` when no safe start exists.
    """
    n = len(messages)
    start = max(0, start)
    issued: set[str] = set()
    i = start
    while i < n:
        message = messages[i]
        results = message.function_results
        if results and any(r.call_id not in issued for r in results):
            start = i + 1
            issued.clear()
        else:
            issued.update(_call_ids(message))
        i += 1
    return start


def _leading_system(messages: Sequence[Message]) -> int:
    count = 0
    for message in messages:
        if message.role != "system":
            break
        count += 1
    return count


def _last_user(messages: Sequence[Message]) -> int | None:
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].role == "user":
            return index
    return None


def _cut(body: Sequence[Message], keep_last: int) -> int:
    """Where to cut `body` to keep about `keep_last` messages: never between a tool call and
    its result, and never after the newest user message (a request without the question it
    answers would leave the model guessing, e.g. in a long tool loop on a small window)."""
    start = safe_start(body, len(body) - keep_last)
    if start >= len(body):
        start = _widen(body, len(body) - keep_last)
    last_user = _last_user(body)
    if last_user is not None and start > last_user:
        start = _widen(body, last_user)
    return start


class TruncatingReducer:
    """Keeps the last `keep_last` messages (leading system messages are kept too and not
    counted), moving the cut so that no tool result is separated from its call and the
    newest user message is always kept.

    When the cut lands inside a tool exchange, the exchange is dropped whole rather than
    split; only if that would leave nothing is the whole exchange kept instead.
    """

    __slots__ = ("keep_last", "keep_system")

    def __init__(self, keep_last: int, *, keep_system: bool = True) -> None:
        if keep_last < 1:
            raise ConfigurationError(f"TruncatingReducer(keep_last={keep_last}) must keep >= 1")
        self.keep_last = keep_last
        self.keep_system = keep_system

    async def reduce(self, messages: Sequence[Message]) -> list[Message]:
        head = _leading_system(messages) if self.keep_system else 0
        body = messages[head:]
        if len(body) <= self.keep_last:
            return list(messages)
        return [*messages[:head], *body[_cut(body, self.keep_last) :]]


def _widen(body: Sequence[Message], start: int) -> int:
    """Move `start` back until every tool result kept has its call kept too."""
    while True:
        issued: set[str] = set()
        wanted: set[str] = set()
        for message in body[start:]:
            wanted.update(r.call_id for r in message.function_results if r.call_id not in issued)
            issued.update(_call_ids(message))
        if not wanted:
            return start
        i = start
        while i > 0 and wanted:
            i -= 1
            wanted.difference_update(_call_ids(body[i]))
        if i == start or i == 0:
            return i
        start = i  # the messages taken back in may hold results of still earlier calls


_SUMMARY_PROMPT = (
    "Summarize the conversation below in a few sentences. Keep names, numbers, decisions, "
    "open questions and anything the user asked to remember. Answer with the summary only."
)


class SummarizingReducer:
    """Replaces older messages with a summary written by a model; keeps the last
    `keep_last` messages verbatim.

    It summarizes only when more than `keep_last + threshold` messages are present, and it
    remembers its summaries (by the id of the last message they cover), so a long
    conversation is summarized incrementally, not again on every turn.
    """

    def __init__(
        self,
        client: ChatClient,
        *,
        keep_last: int = 20,
        threshold: int = 10,
        prompt: str = _SUMMARY_PROMPT,
        options: ChatOptions | None = None,
        cache_size: int = 256,
    ) -> None:
        if keep_last < 1 or threshold < 0:
            raise ConfigurationError(
                f"SummarizingReducer(keep_last={keep_last}, threshold={threshold}) needs "
                "keep_last >= 1 and threshold >= 0"
            )
        self.client = client
        self.keep_last = keep_last
        self.threshold = threshold
        self.prompt = prompt
        self.options = options
        self._cache: OrderedDict[str, str] = OrderedDict()
        self._cache_size = cache_size

    async def reduce(self, messages: Sequence[Message]) -> list[Message]:
        head = _leading_system(messages)
        body = messages[head:]
        if len(body) <= self.keep_last + self.threshold:
            return list(messages)
        cut = _cut(body, self.keep_last)
        if cut == 0:
            return list(messages)
        summary = await self._summary(body[:cut])
        note = Message(
            "system",
            [TextContent(f"Summary of the earlier conversation:\n{summary}")],
            metadata={"summary_of": cut},
        )
        return [*messages[:head], note, *body[cut:]]

    async def _summary(self, older: Sequence[Message]) -> str:
        key = older[-1].message_id
        cached = self._cache.get(key)
        if cached is not None:
            self._cache.move_to_end(key)
            return cached
        previous, since = None, 0
        for index in range(len(older) - 2, -1, -1):
            hit = self._cache.get(older[index].message_id)
            if hit is not None:
                previous, since = hit, index + 1
                break
        request = [Message("system", self.prompt)]
        if previous is not None:
            request.append(Message("user", f"Summary so far:\n{previous}"))
        request.extend(_as_transcript(older[since:]))
        response = await self.client.get_response(request, options=self.options)
        summary = response.text.strip()
        if not summary:  # sending on would silently drop every older message
            raise AgentError(
                "the summarizing model answered with no text, so the older messages could "
                "not be summarized; check the SummarizingReducer's client (it must answer in "
                "text, without tools) or use a TruncatingReducer"
            )
        self._cache[key] = summary
        if len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)
        return summary


def _as_transcript(messages: Sequence[Message]) -> list[Message]:
    """Tool traffic as plain text, so the summarizer needs no tool definitions."""
    lines = []
    for m in messages:
        who = m.author_name or m.role
        parts = [m.text] if m.text else []
        parts += [f"[called {c.name}({c.arguments})]" for c in m.function_calls]
        parts += [f"[result: {r.error if r.is_error else r.result}]" for r in m.function_results]
        if parts:
            lines.append(f"{who}: {' '.join(parts)}")
    return [Message("user", "\n".join(lines))]
