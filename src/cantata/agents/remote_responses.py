"""`ResponsesAgent`: an agent that lives on a server speaking OpenAI's Responses API
(``cantata serve``, or any server with ``/v1/responses``).

Its thread, `ResponsesThread`, is a service thread whose id is the last response id: the
server keeps the conversation, and each turn sends only the new messages with
``previous_response_id``. With ``store=False`` the server keeps nothing, so the thread keeps
the history here and sends it whole each turn. A thread made here also remembers the
turns it took part in, so `get_messages` works until it is serialized; restored, a stored
thread's history is on the server only. Messages written to the thread outside a
run (a team's broadcast, a caller's ``on_new_message``) wait on the thread and go with the
next run: no write is dropped. Only text travels: tool calls and results of the local
side are the local side's business, the server runs its own tools.

Serialized threads (schema 1, kind ``"responses"``) add ``store`` (bool), ``history`` and
``pending`` (lists of messages, registry JSON).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, Unpack

from ..core import (
    CantataError,
    ConfigurationError,
    Message,
    ModelError,
    ModelHTTPError,
    SerializationError,
    TextContent,
    ThreadError,
    Usage,
    new_id,
    to_json,
)
from ._remote import RemoteThread, answer_message, call, events, load_messages
from .agent import Agent, AgentInput
from .response import AgentResponse, AgentResponseStream, AgentResponseUpdate
from .run_options import RunKeywords
from .thread import load_thread_data

if TYPE_CHECKING:
    from openai import AsyncOpenAI

__all__ = ["ResponsesAgent", "ResponsesThread"]

_DEFAULT_TIMEOUT = 300.0


class ResponsesThread(RemoteThread):
    """A conversation on a Responses server, known here by its last response id."""

    kind = "responses"

    def __init__(
        self,
        *,
        id: str | None = None,
        store: bool = True,
        history: list[Message] | None = None,
        pending: list[Message] | None = None,
        client: AsyncOpenAI | None = None,
    ) -> None:
        super().__init__(id=id)
        self.store = store
        # None: the history is on the server only (a stored thread restored by id)
        self._history: list[Message] | None = (
            list(history or []) if history is not None or id is None else None
        )
        self._pending: list[Message] = list(pending or [])
        self._client = client

    async def _delete_on_service(self, thread_id: str) -> None:
        if self._client is None:
            raise ThreadError(
                f"cannot delete response {thread_id!r} on the server: this thread has no "
                "client; restore it with `agent.deserialize_thread(...)` first"
            )
        if self.store:
            await self._client.responses.delete(thread_id)

    def _restored_hint(self) -> str:
        return (
            f"thread {self._id!r} was restored from its id: its history is on the "
            "Responses server, which does not give it back; keep your own copy, or use "
            "ResponsesAgent(store=False)"
        )

    async def _serialize(self) -> dict[str, Any]:
        kept = self._history if not self.store and self._history is not None else None
        return {
            "store": self.store,
            "history": None if kept is None else [to_json(m) for m in kept],
            "pending": [to_json(m) for m in self._pending],
        }

    @classmethod
    async def deserialize(cls, data: Any, **kwargs: Any) -> ResponsesThread:
        """Rebuild from `serialize` data; `kwargs` (``client=``) go to the constructor."""
        fields = load_thread_data(data, cls.kind)
        thread_id, store = fields["id"], fields.get("store")
        if thread_id is not None and (type(thread_id) is not str or not thread_id):
            raise SerializationError("a serialized Responses thread's 'id' must be a string")
        if type(store) is not bool:
            raise SerializationError("a serialized Responses thread needs a boolean 'store'")
        history = fields.get("history")
        if store and history is not None:
            raise SerializationError("a serialized stored Responses thread has no 'history'")
        thread = cls(
            id=thread_id,
            store=store,
            history=None if store else load_messages(history, "history", "Responses"),
            pending=load_messages(fields.get("pending"), "pending", "Responses"),
            **kwargs,
        )
        thread._state = fields["state"] if thread_id is not None else "new"
        return thread


class ResponsesAgent(Agent):
    """A remote agent reached through the Responses API; usable wherever an agent is.

    `client_or_base_url` is an ``openai.AsyncOpenAI`` (yours to close) or a base URL such
    as ``http://127.0.0.1:8000/v1`` (the agent makes and closes its client; ``api_key``
    is the server's token). `model` names the served object.
    """

    thread_type = ResponsesThread

    def __init__(
        self,
        client_or_base_url: AsyncOpenAI | str,
        *,
        model: str,
        name: str | None = None,
        description: str = "",
        instructions: str | None = None,
        store: bool = True,
        api_key: str | None = None,
        timeout: float = _DEFAULT_TIMEOUT,
        id: str | None = None,
    ) -> None:
        if type(model) is not str or not model:
            raise ConfigurationError("ResponsesAgent needs model=, the name of the served object")
        safe = "".join(c if c.isalnum() or c in "_-" else "_" for c in model)[:64]
        super().__init__(
            name=name or safe, description=description, instructions=instructions, id=id
        )
        self.model = model
        self.store = store
        if isinstance(client_or_base_url, str):
            from openai import AsyncOpenAI

            self._client: AsyncOpenAI = AsyncOpenAI(
                base_url=client_or_base_url,
                api_key=api_key or "unused",
                timeout=timeout,
                max_retries=0,
            )
            self._owns_client = True
        else:
            self._client = client_or_base_url
            self._owns_client = False

    async def aclose(self) -> None:
        """Close the client if this agent made it."""
        if self._owns_client:
            self._owns_client = False
            await self._client.close()

    def create_thread(self) -> ResponsesThread:
        return ResponsesThread(store=self.store, client=self._client)

    async def deserialize_thread(self, data: Any) -> ResponsesThread:
        thread = await ResponsesThread.deserialize(data, client=self._client)
        if thread.store != self.store:
            raise ThreadError(
                f"thread of agent `{self.name}` was made with store={thread.store}, but this "
                f"agent has store={self.store}; use an agent with the same store setting"
            )
        return thread

    # -- one turn ----------------------------------------------------------------------

    def _request(self, thread: ResponsesThread, incoming: list[Message]) -> dict[str, Any]:
        outgoing = [*thread._pending, *incoming]
        sent = outgoing if thread.store else [*(thread._history or []), *outgoing]
        items = [_item(m, self.name) for m in sent if m.text]
        if not items:
            raise ThreadError(
                f"agent `{self.name}`: nothing to send (the run has no text input); pass a message"
            )
        request: dict[str, Any] = {"model": self.model, "input": items, "store": thread.store}
        if thread.store and thread.id is not None:
            request["previous_response_id"] = thread.id
        if self._instructions is not None:
            request["instructions"] = self._render_instructions(None)
        return request

    def _finish(
        self,
        thread: ResponsesThread,
        incoming: list[Message],
        response_id: str,
        answer: Message,
        usage: Usage,
    ) -> AgentResponse:
        thread._took_turn(incoming, answer, response_id)
        return AgentResponse(
            [answer],
            thread=thread,
            usage=usage,
            agent_id=self.id,
            finish_reason="stop",
            response_id=response_id,
        )

    async def run(
        self,
        messages: AgentInput = None,
        **kw: Unpack[RunKeywords],
    ) -> AgentResponse:
        """One turn on the server: sends what is new, records the new response id."""
        used = self._checked(kw.get("thread"))
        cancellation_token = kw.get("cancellation_token")
        incoming = self._incoming(messages)
        request = self._request(used, incoming)
        result = await call(
            lambda: self._client.responses.create(**request), self._errors, cancellation_token
        )
        answer = answer_message(self, result.output_text, new_id())
        return self._finish(used, incoming, result.id, answer, _usage(result.usage))

    def run_stream(
        self,
        messages: AgentInput = None,
        **kw: Unpack[RunKeywords],
    ) -> AgentResponseStream:
        """One turn on the server, its answer's text streamed as it comes."""
        final: list[AgentResponse] = []
        cancellation_token = kw.get("cancellation_token")

        async def updates() -> AsyncIterator[AgentResponseUpdate]:
            used = self._checked(kw.get("thread"))
            incoming = self._incoming(messages)
            request = self._request(used, incoming)
            message_id = new_id()
            stream = await call(
                lambda: self._client.responses.create(**request, stream=True),
                self._errors,
                cancellation_token,
            )
            done: Any = None
            async with stream:
                async for event in events(stream, self._errors, cancellation_token):
                    if event.type == "response.output_text.delta":
                        yield AgentResponseUpdate(
                            [TextContent(event.delta)],
                            author_name=self.name,
                            message_id=message_id,
                            agent_id=self.id,
                        )
                    elif event.type == "response.completed":
                        done = event.response
                    elif event.type in ("error", "response.failed"):
                        raise ModelError(
                            f"the Responses server failed the run of `{self.name}`: "
                            f"{getattr(event, 'message', None) or event.type}"
                        )
            if done is None:
                raise ModelError(
                    f"the Responses stream of `{self.name}` ended without response.completed"
                )
            answer = answer_message(self, done.output_text, message_id)
            final.append(self._finish(used, incoming, done.id, answer, _usage(done.usage)))

        return AgentResponseStream(updates(), lambda: final[-1])

    def _errors(self, exc: Exception) -> CantataError | None:
        """The openai client's failures as cantata errors naming the agent."""
        import openai

        if isinstance(exc, openai.APIStatusError):
            return ModelHTTPError(
                f"the Responses server refused the run of `{self.name}` (HTTP "
                f"{exc.status_code}): {exc.message}",
                status_code=exc.status_code,
                body=exc.body,
            )
        if isinstance(exc, openai.APIError):  # connection failures and timeouts
            return ModelError(
                f"cannot reach the Responses server for `{self.name}`: {exc}; check the base "
                "URL and that the server runs"
            )
        return None

    def _checked(self, thread: Any) -> ResponsesThread:
        used = self._thread_for_run(thread)
        assert isinstance(used, ResponsesThread)  # checked by _thread_for_run
        if used.store != self.store:
            raise ThreadError(
                f"thread with store={used.store} given to agent `{self.name}` with "
                f"store={self.store}; create one with `agent.create_thread()`"
            )
        if used._client is None:
            used._client = self._client
        return used


def _item(message: Message, own_name: str) -> dict[str, Any]:
    """A Responses input item; another agent's answer reaches the server as a user's words
    (the server's agent did not say it)."""
    role = message.role
    if (role == "assistant" and message.author_name not in (None, own_name)) or role not in (
        "user",
        "assistant",
        "system",
    ):
        role = "user"
    return {"role": role, "content": message.text}


def _usage(usage: Any) -> Usage:
    if usage is None:
        return Usage()
    return Usage(int(usage.input_tokens or 0), int(usage.output_tokens or 0))
