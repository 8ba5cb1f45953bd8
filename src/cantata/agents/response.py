"""What an agent run returns: the whole response, its streamed updates, and the stream.

Deliberate repetition: `AgentResponse.__init__` assigns its fields one by one, the shape of
every plain constructor (`WorkflowRun`'s, the runtime's `MessageContext`'s); it is written
out because the class is no dataclass: unknown attributes fall through to the last message
(``__getattr__``), which a dataclass's generated methods would not expect."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..core import (
    AgentError,
    Content,
    FunctionApprovalRequestContent,
    Message,
    Role,
    SerializationError,
    TextContent,
    Usage,
    from_json,
    register,
    to_json,
)

if TYPE_CHECKING:
    from .guardrails import GuardrailResult
    from .thread import AgentThread
    from .usage import RunUsage

__all__ = [
    "AgentResponse",
    "AgentResponseStream",
    "AgentResponseUpdate",
    "Citation",
    "ContextAddition",
]


@register(name="cantata.agents.Citation")
@dataclass(frozen=True, slots=True)
class Citation:
    """Where an answer read what it says: a chunk of a document, and its span.

    ``text`` is the chunk (``document_text[start:end]`` of the text the document was
    ingested as: a PDF's or an HTML page's extracted text); ``heading`` is the section
    path above it, ``page`` its PDF page.
    """

    document: str
    chunk: str
    start: int
    end: int
    text: str = ""
    heading: str = ""
    page: int | None = None
    score: float = 0.0


@register(name="cantata.agents.ContextAddition")
@dataclass(slots=True)
class ContextAddition:
    """What one context provider added to one run, as `AgentResponse.context` reports it."""

    source: str
    instructions: list[str] = field(default_factory=list)
    messages: list[Message] = field(default_factory=list)
    tools: list[str] = field(default_factory=list)
    kept: list[Message] = field(default_factory=list)
    """Messages the provider asked the thread to record (``keep=True``)."""
    skipped: str | None = None
    """Why the provider was skipped (it failed and its `on_error` is ``"skip"``)."""


class AgentResponse:
    """The outcome of one agent run: the new messages, the thread, usage, structured output.

    It reads like its last message: attribute access that is not the response's own falls
    through to it, so ``response.role`` and ``response.contents`` work as on a `Message`.
    """

    __slots__ = (
        "agent_id",
        "citations",
        "context",
        "finish_reason",
        "guardrails",
        "messages",
        "response_id",
        "run_usage",
        "thread",
        "usage",
        "value",
    )

    def __init__(
        self,
        messages: list[Message],
        *,
        thread: AgentThread | None = None,
        usage: Usage | None = None,
        value: Any = None,
        agent_id: str | None = None,
        finish_reason: str | None = None,
        response_id: str | None = None,
        context: list[ContextAddition] | None = None,
        citations: list[Citation] | None = None,
        guardrails: list[GuardrailResult] | None = None,
        run_usage: RunUsage | None = None,
    ) -> None:
        self.messages = messages
        self.thread = thread
        self.usage = usage
        self.value = value
        self.agent_id = agent_id
        self.finish_reason = finish_reason
        self.response_id = response_id
        self.context: list[ContextAddition] = context if context is not None else []
        """What each context provider added to this run (empty without providers)."""
        self.citations: list[Citation] = citations if citations is not None else []
        """The sources the answer cites (set by a knowledge provider; empty otherwise)."""
        self.guardrails: list[GuardrailResult] = guardrails if guardrails is not None else []
        """What each guardrail decided in this run, in order (empty without guardrails)."""
        self.run_usage = run_usage
        """The run's usage per model and per agent, its model and tool calls, cost and
        time (set by an agent with usage limits or a price table; None otherwise)."""

    @property
    def text(self) -> str:
        """The text of every new message, joined."""
        return "".join(m.text for m in self.messages)

    @property
    def content(self) -> str:
        """The last message's text, for code that reads a response as one message."""
        return self.messages[-1].text if self.messages else ""

    @property
    def user_input_requests(self) -> list[FunctionApprovalRequestContent]:
        """Tool calls waiting for a person's approval (answer them on the next run)."""
        return [
            c
            for m in self.messages
            for c in m.contents
            if type(c) is FunctionApprovalRequestContent
        ]

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name in _OWN:  # an unset slot (e.g. a bare copy)
            raise AttributeError(name)
        messages = self.messages
        if not messages:
            raise AttributeError(
                f"AgentResponse has no attribute {name!r} (and no message to read it from)"
            )
        return getattr(messages[-1], name)

    def __repr__(self) -> str:
        text = self.text
        short = text if len(text) <= 60 else text[:57] + "..."
        return f"AgentResponse({short!r}, messages={len(self.messages)})"

    def __str__(self) -> str:
        return self.text


_OWN = frozenset(AgentResponse.__slots__)


@dataclass(slots=True)
class AgentResponseUpdate:
    """One chunk of a streamed run. Text arrives in pieces; tool calls and their results
    arrive whole as contents (never as text)."""

    contents: list[Content]
    role: Role = "assistant"
    author_name: str | None = None
    message_id: str | None = None
    agent_id: str | None = None
    response_id: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def text(self) -> str:
        """The text pieces of this chunk (empty for tool calls and results)."""
        return "".join(c.text for c in self.contents if type(c) is TextContent)


class AgentResponseStream:
    """An async iterator of `AgentResponseUpdate`; `response` is the aggregated
    `AgentResponse` once the iteration ends, and `get_response()` drains and returns it.

    The stream is single-use: iterate it once (or call `get_response`).
    """

    __slots__ = ("_finalize", "_finished", "_response", "_source", "_stopped")

    def __init__(
        self,
        source: AsyncIterator[AgentResponseUpdate],
        finalize: Callable[[], AgentResponse],
    ) -> None:
        self._source = source
        self._finalize = finalize
        self._response: AgentResponse | None = None
        self._finished = False
        self._stopped: str | None = None  # why the stream ended without a response

    @property
    def response(self) -> AgentResponse:
        """The aggregated response; raises `AgentError` before the stream has ended."""
        if self._response is None:
            if self._stopped is not None:  # iterating again would not help: say so
                raise AgentError(f"the stream has no response: {self._stopped}")
            raise AgentError(
                "the stream has not ended yet: iterate it to the end, or "
                "`await stream.get_response()`, before reading `stream.response`"
            )
        return self._response

    @property
    def has_response(self) -> bool:
        """True once the stream ended with a response (not before, not on failure)."""
        return self._response is not None

    def __aiter__(self) -> AsyncIterator[AgentResponseUpdate]:
        return self

    async def __anext__(self) -> AgentResponseUpdate:
        if self._finished:
            raise StopAsyncIteration
        try:
            return await self._source.__anext__()
        except StopAsyncIteration:
            self._finished = True
            self._response = self._finalize()
            raise
        except BaseException as exc:
            self._finished = True
            self._stopped = f"the run failed ({type(exc).__name__}: {exc})"
            raise

    async def get_response(self) -> AgentResponse:
        """Drain what is left of the stream and return the aggregated response."""
        async for _ in self:
            pass
        return self.response

    async def aclose(self) -> None:
        """Stop the run early; the thread keeps the messages completed so far."""
        if not self._finished:
            self._stopped = "it was closed before the run ended"
        self._finished = True
        aclose = getattr(self._source, "aclose", None)
        if aclose is not None:
            await aclose()


# --- JSON codecs: responses travel in workflow events and checkpoints -----------------
# A response is written without its thread (serialize the thread itself); the value is
# written through the registry, so a structured-output model class must be registered.


def _enc_response(r: AgentResponse) -> dict[str, Any]:
    return {
        "messages": [to_json(m) for m in r.messages],
        "usage": to_json(r.usage),
        "value": to_json(r.value),
        "agent_id": r.agent_id,
        "finish_reason": r.finish_reason,
        "response_id": r.response_id,
        **({"context": [to_json(c) for c in r.context]} if r.context else {}),
        **({"citations": [to_json(c) for c in r.citations]} if r.citations else {}),
    }


def _dec_response(d: dict[str, Any]) -> AgentResponse:
    messages = from_json(d["messages"])
    if type(messages) is not list or any(type(m) is not Message for m in messages):
        raise SerializationError("field 'messages' of an agent response must be messages")
    usage = from_json(d.get("usage"))
    if usage is not None and type(usage) is not Usage:
        raise SerializationError("field 'usage' of an agent response must be a usage")
    fields = {k: d.get(k) for k in ("agent_id", "finish_reason", "response_id")}
    if any(v is not None and type(v) is not str for v in fields.values()):
        raise SerializationError("agent_id, finish_reason and response_id must be strings")
    context = from_json(d.get("context", []))
    if type(context) is not list:
        raise SerializationError("field 'context' of an agent response must be a list")
    citations = from_json(d.get("citations", []))
    if type(citations) is not list or any(type(c) is not Citation for c in citations):
        raise SerializationError("field 'citations' of an agent response must be citations")
    return AgentResponse(
        messages,
        usage=usage,
        value=from_json(d.get("value")),
        context=context,
        citations=citations,
        **fields,
    )


register(AgentResponse, name="agent_response", encode=_enc_response, decode=_dec_response)
register(AgentResponseUpdate, name="agent_response_update")
