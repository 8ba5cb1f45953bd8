"""`A2AAgent`: an agent that lives on an A2A server (``cantata serve``, or any A2A agent).

Its thread, `A2AThread`, is a service thread whose id is the A2A context id: the server
keeps the conversation, and each turn sends only the new messages in one A2A message
on that context. A thread made here also remembers the turns it took part in, so
`get_messages` works until it is serialized; restored, its history is on the server.
Messages written to the thread outside a run (a team's broadcast, a workflow's history)
wait on the thread and go with the next run, each as its own user message (the parts
of one A2A message carry ``{"cantata": {"message": i, "author": name}}`` metadata, which
a cantata server reads to split them again; other servers see one message).

What travels: text, and binary data or links (`DataContent`, as raw or URL parts). Tool
calls and results of the local side are its own business and stay here. Anything else
(usage, approvals when nothing waits for one) cannot be carried and is refused with
`InvalidMessageError`, and the server cannot delete a context, so `delete()` of a thread
that reached the server raises `ThreadError` (use `forget()` to drop it here).

A task the server leaves ``input-required`` is an answer, and the thread waits on that
task (`A2AThread.waiting_task_id`): the next run goes on it (its task id and context id)
instead of starting a new one. Any A2A server's task: the answer is its status message
(the question), finish reason ``"stop"``, and the next run's message is the reply. A
cantata server's (a served agent's tool needs approval, a served workflow calls
``request_info``) lists its requests in a ``cantata_input`` data part; the answer then holds
the status text and one `FunctionApprovalRequestContent` or ``request_info``
`FunctionCallContent` per request, as from the local agent. The next run's answers to them
(approval responses, function results) go on that task as one data part
``{"answers": {...}}``; messages beside them wait for the turn after. A waiting thread
sends a run without answers on the task too, where a cantata server reads its text as the
answer (``yes``), so text alone answers as it would in any A2A client
(`A2AThread.stop_waiting` leaves the task unanswered instead). A ``cantata_input`` part the
client cannot read is a `ModelOutputError` quoting the status; a task that ends in any
state but completed is a `ModelError` (and nothing waits on it any more).

A completed task's answer is its status message's text, or else the text of its artifacts;
streamed, artifact chunks sent with ``append`` join the artifact they extend, so an answer
streamed in parts is whole in the response and the thread.

Serialized threads (schema 1, kind ``"a2a"``) add ``pending`` (a list of messages) and
``waiting`` (null, or ``{"task_id", "requests": {request_id: "approval" | "request_info"}}``,
``requests`` empty for another server's question; absent in threads written before it,
read as null).
"""

from __future__ import annotations

import asyncio
import math
import re
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias, Unpack

from ..core import (
    CantataError,
    ConfigurationError,
    Content,
    DataContent,
    FunctionApprovalRequestContent,
    FunctionApprovalResponseContent,
    FunctionCallContent,
    FunctionResultContent,
    InvalidMessageError,
    Message,
    ModelError,
    ModelOutputError,
    SerializationError,
    TextContent,
    ThreadError,
    TimeoutError,
    UsageContent,
    loads_json,
    new_id,
    short_repr,
    to_json,
)
from ..models import FinishReason
from ._remote import RemoteThread, answer_message, bounded, call, events, load_messages, mapped
from .agent import Agent, AgentInput
from .response import AgentResponse, AgentResponseStream, AgentResponseUpdate
from .run_options import RunKeywords, chat_keywords
from .thread import load_thread_data

if TYPE_CHECKING:
    import httpx
    from a2a.client import Client
    from a2a.types.a2a_pb2 import Message as A2AMessage
    from a2a.types.a2a_pb2 import Part, SendMessageRequest, Task

__all__ = ["A2A_INPUT_KEY", "A2AAgent", "A2AThread", "a2a_parts", "cantata_messages"]

_DEFAULT_TIMEOUT = 300.0
_META = "cantata"
_LOCAL_ONLY = (FunctionCallContent, FunctionResultContent, UsageContent)


# -- messages on the wire ---------------------------------------------------------------


def a2a_parts(message: Message, *, index: int | None = None) -> list[Part]:
    """The A2A parts of a cantata message (text, raw data, URLs); tool traffic stays
    local (a tool message whole, with the images a tool returned), any other content is
    refused."""
    from a2a.types.a2a_pb2 import Part

    if message.role == "tool":
        return []
    meta: dict[str, Any] | None = None
    if index is not None:
        meta = {_META: {"message": index, "author": message.author_name or ""}}
    parts = []
    for c in message.contents:
        if type(c) is TextContent:
            if c.text:
                parts.append(Part(text=c.text, metadata=meta))
        elif type(c) is DataContent:
            if c.data is not None:
                parts.append(Part(raw=c.data, media_type=c.media_type, metadata=meta))
            else:
                parts.append(Part(url=c.uri, media_type=c.media_type, metadata=meta))
        elif not isinstance(c, _LOCAL_ONLY):
            raise InvalidMessageError(
                f"a message of {message.author_name or message.role!r} holds "
                f"{type(c).__name__}, which A2A cannot carry; send text or DataContent"
            )
    return parts


def cantata_messages(message: A2AMessage) -> list[Message]:
    """The user messages of one A2A message: one per ``cantata.message`` index its parts
    carry, or one for all parts (any other client)."""
    from google.protobuf.json_format import MessageToDict  # type: ignore[import-untyped]

    groups: dict[int, tuple[str | None, list[Content]]] = {}
    for part in message.parts:
        index, author = 0, None
        if part.HasField("metadata"):
            tag = MessageToDict(part.metadata).get(_META)
            number = tag.get("message") if type(tag) is dict else None
            if isinstance(number, int | float) and math.isfinite(number):
                index = int(number)
                author = str(tag.get("author") or "") or None
        content = _content(part)
        if content is not None:
            groups.setdefault(index, (author, []))[1].append(content)
    return [
        Message("user", contents, author_name=author)
        for _, (author, contents) in sorted(groups.items())
        if contents
    ]


def _content(part: Part) -> Content | None:
    from google.protobuf.json_format import MessageToJson

    if part.HasField("text"):
        return TextContent(part.text) if part.text else None
    if part.HasField("raw"):
        return DataContent(part.media_type or "application/octet-stream", data=part.raw)
    if part.HasField("url"):
        return DataContent(part.media_type or "application/octet-stream", uri=part.url)
    if part.HasField("data"):  # structured data: the model reads it as JSON text
        return TextContent(MessageToJson(part.data, indent=None))
    return None


def _text(parts: Iterable[Part]) -> str:
    return "".join(p.text for p in parts if p.HasField("text"))


# -- a task waiting for input ----------------------------------------------------------

A2A_INPUT_KEY = "cantata_input"
"""The key of the data part in which a waiting A2A task lists its requests: written by
`cantata serve` (which imports it from here), read by `A2AThread`."""
_REQUEST_INFO = "request_info"  # workflows.REQUEST_INFO: the call a WorkflowAgent asks with
_KINDS = ("approval", "request_info")
_MAX_REQUESTS = 100
_NONE = object()
_InputRequest: TypeAlias = FunctionApprovalRequestContent | FunctionCallContent
"""What a waiting task's request becomes: an approval request, or a ``request_info`` call."""


@dataclass(frozen=True, slots=True)
class _Waiting:
    """A task that waits for input: its id, and the kind of each request by request id
    (none: the task asked a question, answered by the next message's text)."""

    task_id: str
    requests: dict[str, str]

    def answer(self, content: Content) -> tuple[str, Any] | None:
        """The request id `content` answers and the answer as sent, or None (not an answer:
        a tool result of the local side, text); an approval of no waiting approval is
        refused."""
        if type(content) is FunctionApprovalResponseContent:
            if self.requests.get(content.request_id) != "approval":
                raise InvalidMessageError(
                    f"an approval answers request {content.request_id!r}, but task "
                    f"{self.task_id!r} waits for approvals of {self._ids('approval')}"
                )
            return content.request_id, bool(content.approved)
        if (
            type(content) is FunctionResultContent
            and self.requests.get(content.call_id) == "request_info"
        ):
            return content.call_id, to_json(content.result)
        return None

    def _ids(self, kind: str) -> list[str]:
        return sorted(r for r, k in self.requests.items() if k == kind)

    def to_json(self) -> dict[str, Any]:
        return {"task_id": self.task_id, "requests": dict(self.requests)}

    @classmethod
    def from_json(cls, data: Any) -> _Waiting:
        requests = data.get("requests") if type(data) is dict else None
        if (
            type(data) is not dict
            or type(data.get("task_id")) is not str
            or not data["task_id"]
            or type(requests) is not dict
            or not all(type(r) is str and k in _KINDS for r, k in requests.items())
        ):
            raise SerializationError(
                "'waiting' of a serialized A2A thread needs a 'task_id' string and 'requests' "
                "mapping request ids to 'approval' or 'request_info' (empty for a question)"
            )
        return cls(data["task_id"], dict(requests))


@dataclass(frozen=True, slots=True)
class _Turn:
    """One message to the server, and what it does to the thread once it succeeds."""

    request: SendMessageRequest
    taken: int
    """How many of the thread's pending messages it took."""
    recorded: list[Message]
    """What joins the history (sent, or local tool traffic)."""
    held: list[Message]
    """Messages that wait for the next turn (written beside answers to a waiting task)."""


def _arguments(fields: dict[str, Any]) -> Any:
    """A listed request's arguments: its exact JSON text ``arguments_json`` when the server
    sends one (a data part's numbers are doubles), else ``arguments`` with whole numbers as
    ints; None when the text is no JSON."""
    exact = fields.get("arguments_json")
    if type(exact) is str:
        try:
            return loads_json(exact)
        except SerializationError:
            return None
    return whole_numbers(fields.get("arguments", {}))


def whole_numbers(value: Any) -> Any:
    """JSON numbers from A2A data parts are doubles; a whole one becomes an int."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, list):
        return [whole_numbers(v) for v in value]
    if isinstance(value, dict):
        return {k: whole_numbers(v) for k, v in value.items()}
    return value


# -- the thread ------------------------------------------------------------------------


class A2AThread(RemoteThread):
    """A conversation on an A2A server, known here by its context id."""

    kind = "a2a"

    def __init__(
        self,
        *,
        id: str | None = None,
        pending: list[Message] | None = None,
        history: list[Message] | None = None,
    ) -> None:
        super().__init__(id=id)
        # None: the history is on the server only (a thread restored from its id)
        self._history: list[Message] | None = list(history or []) if id is None else history
        self._pending: list[Message] = list(pending or [])
        self._waiting: _Waiting | None = None

    @property
    def waiting_task_id(self) -> str | None:
        """The id of the server's task that waits for input on this thread (its requests
        were the last answer), or None; the next run answers it."""
        return self._waiting.task_id if self._waiting is not None else None

    async def _delete_on_service(self, thread_id: str) -> None:
        raise ThreadError(
            f"A2A has no way to delete context {thread_id!r}: it stays on the server with "
            "its tasks. Call `thread.forget()` to stop using it here"
        )

    def stop_waiting(self) -> None:
        """Leave the task that waits for input unanswered: the next run starts a new task
        on the context (the server keeps the old one as input-required)."""
        self._waiting = None

    def forget(self) -> None:
        """Drop this thread here (the server keeps the context); it cannot be used again."""
        self._state = "deleted"

    def _check_outgoing(self, messages: list[Message]) -> None:
        for m in messages:
            if self._waiting is not None:  # answers to the waiting task may wait here too
                m = m.copy(contents=[c for c in m.contents if self._waiting.answer(c) is None])
            a2a_parts(m)

    def _took_a2a_turn(
        self, turn: _Turn, answer: Message, context_id: str, waiting: _Waiting | None
    ) -> None:
        """A turn succeeded: what it sent joins the history, what it held back waits for the
        next turn (so do messages written meanwhile), and the thread waits on `waiting`."""
        if self._history is not None:
            self._history.extend([*turn.recorded, answer])
        self._set_id(context_id)
        self._pending = [*turn.held, *self._pending[turn.taken :]]
        self._waiting = waiting

    def _restored_hint(self) -> str:
        return (
            f"thread {self._id!r} was restored from its A2A context id: its history is "
            "on the A2A server (its tasks); read it there, or keep your own copy"
        )

    async def _serialize(self) -> dict[str, Any]:
        waiting = self._waiting
        return {
            "pending": [to_json(m) for m in self._pending],
            "waiting": None if waiting is None else waiting.to_json(),
        }

    @classmethod
    async def deserialize(cls, data: Any, **kwargs: Any) -> A2AThread:
        """Rebuild from `serialize` data."""
        fields = load_thread_data(data, cls.kind)
        thread_id = fields["id"]
        if thread_id is not None and (type(thread_id) is not str or not thread_id):
            raise SerializationError("a serialized A2A thread's 'id' must be a string")
        messages = load_messages(fields.get("pending"), "pending", "A2A")
        thread = cls(id=thread_id, pending=messages, **kwargs)
        thread._state = fields["state"] if thread_id is not None else "new"
        if fields.get("waiting") is not None:
            if thread_id is None:
                raise SerializationError("a serialized A2A thread without an id cannot wait")
            thread._waiting = _Waiting.from_json(fields["waiting"])
        return thread


# -- the agent -------------------------------------------------------------------------


class A2AAgent(Agent):
    """A remote agent reached over A2A; usable wherever an agent is.

    `url` is the agent's base URL: its card is read from
    ``<url>/.well-known/agent-card.json`` (for ``cantata serve``:
    ``http://host:port/a2a/<name>``). `token` is sent as a bearer token (the server's
    ``--token``). `httpx_client` (yours to close) replaces the client the agent makes.

    A remote run that waits for a person returns like a local one: approvals in
    `AgentResponse.user_input_requests` (finish reason ``"approval_required"``), a served
    workflow's requests as ``request_info`` function calls (``"tool_calls"``). Answer on the
    same thread (restored from `serialize()` data or not): ``request.create_response(True)``
    in a user message, or ``FunctionResultContent(call.call_id, value)`` (a JSON value) in a
    tool message; every waiting request in one run.
    """

    thread_type = A2AThread

    def __init__(
        self,
        url: str,
        *,
        name: str | None = None,
        description: str = "",
        token: str | None = None,
        timeout: float = _DEFAULT_TIMEOUT,
        httpx_client: httpx.AsyncClient | None = None,
        id: str | None = None,
    ) -> None:
        if type(url) is not str or not url.startswith(("http://", "https://")):
            raise ConfigurationError(
                f"A2AAgent needs the agent's http(s) base URL, got {url!r:.80}"
            )
        if not timeout > 0:
            raise ConfigurationError(f"A2AAgent timeout must be positive, got {timeout!r}")
        super().__init__(name=name or _name_from(url), description=description, id=id)
        self.url = url.rstrip("/")
        self._token = token
        self._timeout = timeout
        self._http = httpx_client
        self._owns_http = httpx_client is None
        self._clients: dict[bool, Client] = {}
        self._connecting: asyncio.Lock | None = None

    async def aclose(self) -> None:
        """Close the HTTP client if this agent made it."""
        clients, self._clients = self._clients, {}
        for client in clients.values():
            await client.close()
        if self._owns_http and self._http is not None:
            http, self._http = self._http, None
            await http.aclose()

    def create_thread(self) -> A2AThread:
        return A2AThread()

    async def deserialize_thread(self, data: Any) -> A2AThread:
        return await A2AThread.deserialize(data)

    async def _client(self, streaming: bool) -> Client:
        """The SDK client (made on first use, from the agent's card)."""
        if streaming in self._clients:
            return self._clients[streaming]
        if self._connecting is None:
            self._connecting = asyncio.Lock()
        async with self._connecting:
            if streaming not in self._clients:
                await self._connect()
        return self._clients[streaming]

    async def _connect(self) -> None:
        import httpx
        from a2a.client import A2ACardResolver, ClientConfig, ClientFactory

        if self._http is None:
            headers = {"Authorization": f"Bearer {self._token}"} if self._token else {}
            self._http = httpx.AsyncClient(timeout=self._timeout, headers=headers)
        resolver = A2ACardResolver(self._http, self.url)
        card = await mapped(resolver.get_agent_card(), self._errors)
        for streaming in (False, True):
            config = ClientConfig(streaming=streaming, httpx_client=self._http)
            try:
                self._clients[streaming] = ClientFactory(config).create(card)
            except ValueError as exc:
                raise ModelError(
                    f"the A2A agent at {self.url} offers no transport this client speaks "
                    f"({exc}); it needs a JSON-RPC interface"
                ) from None

    # -- one turn ----------------------------------------------------------------------

    def _request(self, thread: A2AThread, incoming: list[Message]) -> _Turn:
        """The next message on the thread's context: what is new, or, when a task waits for
        input, the answers to it on that task (other messages then wait for the next turn;
        text alone is sent on the task, where the server reads it as the answer)."""
        from a2a.types.a2a_pb2 import Message as A2AMessage
        from a2a.types.a2a_pb2 import Role, SendMessageRequest

        queued = [*thread._pending, *incoming]
        waiting = thread._waiting
        answers, held = self._answers(waiting, queued) if waiting is not None else ({}, [])
        if answers and waiting is not None:
            parts = [self._answers_part(answers, waiting)]
        else:
            held = []
            parts = self._parts([m for m in queued if not self._said_it(m)])
        kept = {id(m) for m in held}
        message = A2AMessage(
            role=Role.ROLE_USER,
            message_id=new_id(),
            parts=parts,
            context_id=thread.id or "",
            task_id=waiting.task_id if waiting is not None else "",
        )
        return _Turn(
            SendMessageRequest(message=message),
            taken=len(thread._pending),
            recorded=[m for m in queued if id(m) not in kept],
            held=held,
        )

    def _parts(self, outgoing: list[Message]) -> list[Part]:
        several = len(outgoing) > 1
        parts = [
            p for i, m in enumerate(outgoing) for p in a2a_parts(m, index=i if several else None)
        ]
        if not parts:
            raise ThreadError(
                f"agent `{self.name}`: nothing to send (the run has no text or data input); "
                "pass a message"
            )
        return parts

    def _answers(
        self, waiting: _Waiting, queued: list[Message]
    ) -> tuple[dict[str, Any], list[Message]]:
        """The answers `queued` gives the waiting task, and the messages that are no
        answers (held for the next turn). Answers come all at once, each in a message of
        its own kind: a message mixing them with text is refused (the text would be lost)."""
        answers: dict[str, Any] = {}
        held: list[Message] = []
        for m in queued:
            found = dict(a for a in map(waiting.answer, m.contents) if a is not None)
            if not found:
                held.append(m)
                continue
            rest = [c for c in m.contents if waiting.answer(c) is None]
            if a2a_parts(m.copy(contents=rest)):
                raise InvalidMessageError(
                    f"agent `{self.name}`: a message answering task {waiting.task_id!r} also "
                    "holds text or data, which has no place on that task; send it in a "
                    "message of its own (it then goes with the next turn)"
                )
            answers.update(found)
        missing = sorted(set(waiting.requests) - set(answers))
        if answers and missing:
            raise InvalidMessageError(
                f"agent `{self.name}`: task {waiting.task_id!r} at {self.url} waits for "
                f"answers to {sorted(waiting.requests)}, all in one run; missing {missing}"
            )
        return answers, held

    def _answers_part(self, answers: dict[str, Any], waiting: _Waiting) -> Part:
        from a2a.helpers import new_data_part
        from google.protobuf.json_format import Error as ProtobufJsonError

        try:
            return new_data_part({"answers": answers})
        except (ProtobufJsonError, TypeError, ValueError) as exc:
            raise InvalidMessageError(
                f"agent `{self.name}`: the answers to task {waiting.task_id!r} cannot travel "
                f"as JSON ({exc}); answer with JSON values"
            ) from None

    def _said_it(self, message: Message) -> bool:
        """An answer of this agent is on the server already."""
        return message.role == "assistant" and message.author_name == self.name

    def _finish(self, thread: A2AThread, turn: _Turn, task: Task, message_id: str) -> AgentResponse:
        """The task's end as this agent's answer: its text, or (``input-required``) the
        requests it waits for, the thread then waiting on it."""
        from a2a.types.a2a_pb2 import TaskState

        state = task.status.state
        text = _text(task.status.message.parts) if task.status.HasField("message") else ""
        waiting: _Waiting | None = None
        if state == TaskState.TASK_STATE_INPUT_REQUIRED:
            requests = self._input_requests(task, text)
            waiting = _Waiting(task.id, {_request_id(r): _kind(r) for r in requests})
            said: list[Content] = [TextContent(text)] if text else []
            if not requests:  # another server's question: its status message says it all
                parts = task.status.message.parts if task.status.HasField("message") else []
                said = [c for c in map(_content, parts) if c is not None]
            answer = answer_message(self, [*said, *requests], message_id)
            approvals = any(type(r) is FunctionApprovalRequestContent for r in requests)
            finish: FinishReason = (
                "approval_required" if approvals else "tool_calls" if requests else "stop"
            )
        elif state == TaskState.TASK_STATE_COMPLETED:
            if not text:
                text = "".join(_text(a.parts) for a in task.artifacts)
            answer = answer_message(self, text, message_id)
            finish = "stop"
        else:
            if thread._waiting is not None and thread._waiting.task_id == task.id:
                thread._waiting = None  # the task it waited on ended: nothing waits now
            label = TaskState.Name(state).removeprefix("TASK_STATE_").lower()
            raise ModelError(
                f"the A2A agent at {self.url} ended task {task.id!r} as {label}"
                f"{': ' + text if text else ''}"
            )
        thread._took_a2a_turn(turn, answer, task.context_id, waiting)
        return AgentResponse(
            [answer], thread=thread, agent_id=self.id, finish_reason=finish, response_id=task.id
        )

    def _input_requests(self, task: Task, text: str) -> list[_InputRequest]:
        """The requests a waiting task lists in its status (a data part ``cantata_input``;
        none when it has no such part: the status asks a question), or a `ModelOutputError`
        quoting the status when the part cannot be read, so a person can still act on it."""
        from google.protobuf.json_format import MessageToDict

        listed: Any = _NONE
        for part in task.status.message.parts:
            if part.HasField("data"):
                value = MessageToDict(part.data)
                if type(value) is dict and A2A_INPUT_KEY in value:
                    listed = value[A2A_INPUT_KEY]
        if listed is _NONE:
            return []
        if type(listed) is not list or not 0 < len(listed) <= _MAX_REQUESTS:
            raise self._unreadable(
                task,
                text,
                f"its status lists no requests (a data part {{{A2A_INPUT_KEY!r}: [...]}})",
            )
        out = [self._input_request(item, task, text) for item in listed]
        if len({_request_id(r) for r in out}) != len(out):
            raise self._unreadable(task, text, "its status lists a request id twice")
        return out

    def _input_request(self, item: Any, task: Task, text: str) -> _InputRequest:
        fields = item if type(item) is dict else {}
        rid, kind, name = fields.get("request_id"), fields.get("kind"), fields.get("name")
        arguments = _arguments(fields)
        if (
            type(rid) is not str
            or not rid
            or kind not in _KINDS
            or type(name) is not str
            or not name
            or (kind == "request_info" and name != _REQUEST_INFO)
            or type(arguments) not in (dict, str)
        ):
            raise self._unreadable(
                task,
                text,
                f"it lists a request this client cannot read ({short_repr(item, 120)}); each "
                "needs a request_id, a kind ('approval' or 'request_info'), a name and "
                "arguments (an object)",
            )
        call = FunctionCallContent(rid, name, arguments)
        return FunctionApprovalRequestContent(rid, call) if kind == "approval" else call

    def _unreadable(self, task: Task, text: str, why: str) -> ModelOutputError:
        return ModelOutputError(
            f"the A2A agent at {self.url} (agent `{self.name}`) left task {task.id!r} waiting "
            f"for input, but {why}; its status said: {short_repr(text, 500)}"
        )

    async def run(
        self,
        messages: AgentInput = None,
        **kw: Unpack[RunKeywords],
    ) -> AgentResponse:
        """One turn on the server (``SendMessage``): sends what is new on the context."""
        used = self._checked(kw)
        cancellation_token = kw.get("cancellation_token")
        incoming = self._incoming(messages)
        turn = self._request(used, incoming)
        client = await bounded(lambda: self._client(False), cancellation_token)

        async def send() -> Task:
            replies = client.send_message(turn.request)
            try:
                async for event in replies:
                    if event.HasField("task"):
                        return event.task
                    if event.HasField("message"):
                        return _as_task(event.message, used.id)
            finally:
                await replies.aclose()  # type: ignore[attr-defined]
            raise ModelError(f"the A2A agent at {self.url} answered nothing")

        task = await call(send, self._errors, cancellation_token)
        return self._finish(used, turn, task, new_id())

    def run_stream(
        self,
        messages: AgentInput = None,
        **kw: Unpack[RunKeywords],
    ) -> AgentResponseStream:
        """One turn on the server (``SendStreamingMessage``), the answer's text streamed
        as the server's artifact chunks arrive."""
        final: list[AgentResponse] = []
        cancellation_token = kw.get("cancellation_token")

        async def updates() -> AsyncIterator[AgentResponseUpdate]:
            used = self._checked(kw)
            incoming = self._incoming(messages)
            turn = self._request(used, incoming)
            client = await bounded(lambda: self._client(True), cancellation_token)
            message_id = new_id()
            task: Task | None = None
            streamed: list[str] = []
            stream = client.send_message(turn.request)
            async for event in events(stream, self._errors, cancellation_token):
                if event.HasField("artifact_update"):
                    task = _with_artifact(task, event.artifact_update)
                    piece = _text(event.artifact_update.artifact.parts)
                    if piece:
                        streamed.append(piece)
                        yield AgentResponseUpdate(
                            [TextContent(piece)],
                            author_name=self.name,
                            message_id=message_id,
                            agent_id=self.id,
                        )
                elif event.HasField("task"):
                    task = event.task
                elif event.HasField("status_update"):
                    task = _updated(task, event.status_update)
                elif event.HasField("message"):
                    task = _as_task(event.message, used.id)
            if task is None:
                raise ModelError(f"the A2A stream of {self.url} ended without a task")
            response = self._finish(used, turn, task, message_id)
            if used._waiting is not None:  # the requests, and the words not streamed yet
                yield self._rest(response, "".join(streamed))
            final.append(response)

        return AgentResponseStream(updates(), lambda: final[-1])

    def _rest(self, response: AgentResponse, streamed: str) -> AgentResponseUpdate:
        """The last update of a streamed run that waits: its requests, after the part of
        the status text the artifact chunks did not carry."""
        (message,) = response.messages
        said = message.text
        rest = said[len(streamed) :] if said.startswith(streamed) else ""
        requests = [c for c in message.contents if type(c) is not TextContent]
        return AgentResponseUpdate(
            [*([TextContent(rest)] if rest else []), *requests],
            author_name=self.name,
            message_id=message.message_id,
            agent_id=self.id,
        )

    def _errors(self, exc: Exception) -> CantataError | None:
        """The SDK's failures as cantata errors naming the agent and its URL."""
        from a2a.client import A2AClientTimeoutError, AgentCardResolutionError
        from a2a.utils.errors import A2AError

        if isinstance(exc, A2AClientTimeoutError):
            return TimeoutError(
                f"the A2A agent at {self.url} did not answer within {self._timeout:g} s "
                f"(agent `{self.name}`); raise timeout= or check the server"
            )
        if isinstance(exc, AgentCardResolutionError):
            return ModelError(
                f"cannot read the agent card of `{self.name}` at {self.url}: {exc}; check the "
                "URL (for cantata serve: http://host:port/a2a/<name>) and that the server runs"
            )
        if isinstance(exc, A2AError):
            return ModelError(f"the A2A agent at {self.url} failed the run of `{self.name}`: {exc}")
        return None

    def _checked(self, kw: RunKeywords) -> A2AThread:
        chat_options = chat_keywords(kw)
        if chat_options or kw.get("instructions_override") is not None:
            raise ConfigurationError(
                f"agent `{self.name}` runs on an A2A server, which takes no chat options nor "
                f"instructions_override (got {sorted(chat_options) or ['instructions_override']})"
                "; set them on the served agent"
            )
        used = self._thread_for_run(kw.get("thread"))
        assert isinstance(used, A2AThread)  # checked by _thread_for_run
        return used


def _name_from(url: str) -> str:
    tail = url.rstrip("/").rsplit("/", 1)[-1]
    name = re.sub(r"[^A-Za-z0-9_-]", "_", tail)[:64]
    return name if name and "." not in tail and ":" not in tail else "a2a_agent"


def _request_id(request: _InputRequest) -> str:
    if isinstance(request, FunctionApprovalRequestContent):
        return request.request_id
    return request.call_id


def _kind(request: _InputRequest) -> str:
    return "approval" if type(request) is FunctionApprovalRequestContent else "request_info"


def _as_task(message: A2AMessage, context_id: str | None) -> Task:
    """A message-only answer (other A2A servers) read as a completed task."""
    from a2a.types.a2a_pb2 import Task, TaskState, TaskStatus

    return Task(
        id=message.task_id or new_id(),
        context_id=message.context_id or context_id or "",
        status=TaskStatus(state=TaskState.TASK_STATE_COMPLETED, message=message),
    )


def _updated(task: Task | None, update: Any) -> Task:
    """`task` (changed in place: it is this stream's own) with the status of `update`."""
    from a2a.types.a2a_pb2 import Task

    out = Task() if task is None else task
    out.id, out.context_id = update.task_id, update.context_id
    out.status.CopyFrom(update.status)
    return out


def _with_artifact(task: Task | None, update: Any) -> Task:
    """`task` (changed in place) with the artifact of `update`: its parts appended to the
    artifact of the same id when the update says ``append``, else the artifact as sent
    (as the SDK's own task manager keeps them)."""
    from a2a.types.a2a_pb2 import Task

    out = Task(id=update.task_id, context_id=update.context_id) if task is None else task
    new = update.artifact
    for kept in out.artifacts:
        if kept.artifact_id == new.artifact_id:
            if update.append:
                kept.parts.extend(new.parts)
            else:
                kept.CopyFrom(new)
            return out
    out.artifacts.append(new)
    return out
