"""``/v1/responses``: conversations kept on the server, continued by ``previous_response_id``.

A request runs the served object on the thread named by ``previous_response_id`` (empty
without one) plus its ``input``; the new messages are stored after that thread and the
answer's id names the whole thread so far (see `threads`). ``store: false`` answers without
storing. The answer is one output message holding the run's text; streamed, it goes out as
the Responses API's events (``response.output_text.delta`` ... ``response.completed``). A
run that fails ends the stream with ``response.failed`` (a run the server stops at
shutdown: error code ``server_shutting_down``). An answer that ``max_output_tokens`` cut
is ``incomplete`` (``incomplete_details.reason`` ``max_output_tokens``; streamed, it ends
with ``response.incomplete``).

Tools the client sends (``tools`` of type ``function``) are declared to a served agent's
model for this request (see `openai_tools`): a call of one is a ``function_call`` output
item, answered by a ``function_call_output`` item in the next request (after
``previous_response_id``, or after the history the client sends). Input items that refer to
stored output items (``item_reference``, as the Vercel AI SDK sends earlier turns) are
read from the response that holds them.

A run that waits for a person adds its requests to the output, after the message: a tool
needing approval as an ``mcp_approval_request`` item (``server_label`` is the served name),
a workflow's request as a ``request_info`` ``function_call`` item. The next request, with
``previous_response_id`` set to that answer, answers them with ``mcp_approval_response`` and
``function_call_output`` items; they are checked against what the thread waits for (the
same mechanism as A2A's, `human_input`), and a bad answer is a 400 that changes nothing.
With one approval waiting, the input ``yes`` or ``no`` answers it; any other input that
would pass a pending approval by is a 409 (``input_required``) showing the items to send.
The first answer to a response claims it in the server's store (`AnswerClaim`), so of many
answers to one response, at once or later, in any process, one runs: the others are a 409
with code ``already_answered``.
"""

from __future__ import annotations

import itertools
import json
import re
import time
from collections.abc import AsyncGenerator, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ..agents import AgentResponse, Citation, LocalThread
from ..core import (
    CantataError,
    FunctionCallContent,
    Message,
    Usage,
)
from .drain import Drain
from .errors import RequestError, error_body, error_response
from .event_stream import EventStream
from .human_input import (
    CLAIM_SLACK,
    AnswerClaim,
    InputRequest,
    WaitingThreads,
    input_requests,
    needs_held_run,
    response_answers,
    yes_or_no,
)
from .limits import STREAM_FAILURE
from .openai_format import OutputFormat, output_format
from .openai_messages import (
    answer_text,
    optional_bool,
    optional_str,
    read_body,
    referenced_items,
    require_served,
    response_input,
    sampling_options,
)
from .openai_tools import ClientTools, arguments_text, client_tools
from .served import Served
from .threads import ResponseRecord, ResponseThreads

__all__ = ["create_response", "delete_response", "get_response"]

_CLAIM = "answer:resp:"
"""Store key prefix of the claim on the answer to a response's requests."""


@dataclass(slots=True)
class _Turn:
    """One request, checked: what runs, on what, and where its result goes."""

    entry: Served
    threads: ResponseThreads
    incoming: list[Message]
    previous: ResponseRecord | None
    thread: LocalThread
    known: int
    store: bool
    instructions: str | None
    response_id: str
    stream: bool
    sampling: dict[str, Any]
    waiting: WaitingThreads
    held: bool
    """The thread is the one a workflow's waiting run was held with."""
    drain: Drain
    tools: ClientTools
    format: OutputFormat
    claim: AnswerClaim | None
    """The claim of this request's answer to what `previous` waits for, if it answers."""

    def run_options(self) -> dict[str, Any]:
        options = {**self.sampling, **self.tools.run_options(), **self.format.run_options()}
        if self.instructions is not None:
            options["instructions_override"] = self.instructions
        return options

    def body(
        self,
        text: str,
        usage: Usage | None,
        status: str = "completed",
        requests: list[InputRequest] | None = None,
        calls: list[FunctionCallContent] | None = None,
        citations: Sequence[Citation] = (),
    ) -> dict[str, Any]:
        u = usage or Usage()
        output: list[dict[str, Any]] = []
        if status in ("completed", "incomplete"):
            if text or not calls:
                item = _message_item(self.response_id, text, _annotations(text, citations))
                output.append({**item, "status": status})
            output.extend(_call_item(self.response_id, i, c) for i, c in enumerate(calls or []))
            output.extend(_request_item(r, self.entry.name) for r in requests or [])
        return {
            "id": self.response_id,
            "object": "response",
            "created_at": int(time.time()),
            "status": status,
            "model": self.entry.name,
            "output": output,
            "previous_response_id": self.previous.id if self.previous else None,
            "instructions": self.instructions,
            "store": self.store,
            "error": None,
            "incomplete_details": (
                {"reason": "max_output_tokens"} if status == "incomplete" else None
            ),
            "metadata": {},
            "parallel_tool_calls": False,
            "temperature": None,
            "top_p": None,
            "tool_choice": _choice_json(self.tools.choice),
            "tools": [
                {
                    "type": "function",
                    "name": spec.name,
                    "description": spec.description,
                    "parameters": spec.parameters,
                    "strict": False,
                }
                for spec in self.tools.specs
            ]
            + _server_tool(self.entry, requests or []),
            "text": {"format": self.format.to_json()},
            "truncation": "disabled",
            "usage": {
                "input_tokens": u.input_tokens,
                "input_tokens_details": {"cached_tokens": u.cached_input_tokens},
                "output_tokens": u.output_tokens,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": u.total_tokens,
            },
        }

    async def finish(self, response: AgentResponse) -> dict[str, Any]:
        """The answer's JSON, stored with the new messages when the request stores; a
        workflow's run that waits is held for the answer."""
        requests = input_requests(response.messages)
        calls = self.tools.calls(response)
        text = self.format.answer(response, answer_text(response))
        if not text and requests:  # what it waits for, for clients that read only text
            lines = [r.describe() for r in requests]
            text = "\n".join([*lines, f"(waiting in {self.response_id})"])
        cut = response.finish_reason == "length" and not calls and not requests
        status = "incomplete" if cut else "completed"
        body = self.body(
            text,
            response.usage,
            status,
            requests=requests,
            calls=calls,
            citations=response.citations,
        )
        if self.store and needs_held_run(requests):
            self.waiting.hold(self.response_id, self.thread)
        if self.store:
            new = (await self.thread.get_messages())[self.known :]
            await self.threads.save(
                self.response_id,
                model=self.entry.name,
                previous=self.previous,
                new=new,
                response=body,
            )
        if self.claim is not None:
            await self.claim.answered(self.response_id)
        return body

    async def refused(self, exc: BaseException) -> None:
        """The run failed: a held thread waits again under the response it came from (a
        workflow refuses a wrong answer before taking it). The answer an agent's run took
        stays spent (an approved call may have run); a team's or workflow's is given back,
        as their own claim on the waiting session decides (a session that failed is gone)."""
        if self.held and self.previous is not None:
            self.waiting.hold(self.previous.id, self.thread)
        if self.claim is not None:
            if self.entry.kind == "agent":
                await self.claim.failed(str(exc) or type(exc).__name__)
            else:
                await self.claim.release()


def _choice_json(choice: str | None) -> Any:
    if choice is None or choice in ("auto", "none", "required"):
        return choice or "auto"
    return {"type": "function", "name": choice}


def _call_item(response_id: str, index: int, call: FunctionCallContent) -> dict[str, Any]:
    """A call of a client's tool as an output item (its id names the response, so an
    ``item_reference`` to it is found again)."""
    return {
        "type": "function_call",
        "id": f"fc_{response_id[5:]}_{index}",
        "call_id": call.call_id,
        "name": call.name,
        "arguments": arguments_text(call),
        "status": "completed",
    }


_ITEM_ID = re.compile(r"(?:msg|fc)_([0-9a-f]{32})(?:_\d{1,4})?")


async def _referenced(ids: list[str], threads: ResponseThreads) -> dict[str, dict[str, Any]]:
    """The stored output items `ids` name (an id this server did not give out, or whose
    response is gone, is left out: `response_input` then says which)."""
    found: dict[str, dict[str, Any]] = {}
    records: dict[str, ResponseRecord | None] = {}
    for ref in ids:
        match = _ITEM_ID.fullmatch(ref)
        if match is None or ref in found:
            continue
        response_id = f"resp_{match.group(1)}"
        if response_id not in records:
            try:
                records[response_id] = await threads.get(response_id)
            except RequestError:
                records[response_id] = None
        record = records[response_id]
        output = record.response.get("output") if record is not None else None
        for item in output if type(output) is list else []:
            if type(item) is dict and item.get("id") == ref:
                found[ref] = item
    return found


async def _implied_previous(body: dict[str, Any], threads: ResponseThreads) -> dict[str, Any]:
    """`body` continuing the response whose approval requests it answers, when it sends its
    own copy of the conversation instead of ``previous_response_id`` (the Agents SDK does
    by default): the last assistant message item that this server gave out names that
    response, whose stored thread the answers then continue; the client's copy of what came
    before is left out (what may be answered is what the run asked, never what the client
    says it asked)."""
    items = body.get("input")
    if body.get("previous_response_id") is not None or type(items) is not list:
        return body
    if _typed_yes_or_no(items):
        return await _waiting_named(body, items, threads)
    if not any(type(i) is dict and i.get("type") == "mcp_approval_response" for i in items):
        return body
    for index in range(len(items) - 1, -1, -1):
        item = items[index]
        if type(item) is not dict or item.get("type", "message") != "message":
            continue
        match = _ITEM_ID.fullmatch(str(item.get("id", "")))
        if match is None or not item["id"].startswith("msg_"):
            continue
        try:
            record = await threads.get(f"resp_{match.group(1)}")
        except RequestError:
            continue
        output = record.response.get("output")
        given = {o.get("id") for o in output if type(o) is dict} if type(output) is list else set()
        if item["id"] not in given:
            continue
        rest = [i for i in items[index + 1 :] if not (type(i) is dict and i.get("id") in given)]
        return {**body, "previous_response_id": record.id, "input": rest}
    return body


_WAITING_IN = re.compile(r"\(waiting in (resp_[0-9a-f]{32})\)")


def _typed_yes_or_no(items: list[Any]) -> bool:
    """Whether the input ends with a user message of just ``yes`` or ``no``."""
    last = items[-1] if items else None
    if type(last) is not dict or last.get("role") != "user":
        return False
    return yes_or_no(_item_text(last)) is not None


def _item_text(item: dict[str, Any]) -> str:
    content = item.get("content")
    if type(content) is str:
        return content
    parts = content if type(content) is list else []
    return "".join(str(p.get("text", "")) for p in parts if type(p) is dict)


async def _waiting_named(
    body: dict[str, Any], items: list[Any], threads: ResponseThreads
) -> dict[str, Any]:
    """`body` continuing the waiting response that the client's copy of the conversation
    names in the text of its last assistant message (``(waiting in resp_...)``, as the text
    of an answer that waits says), when a text-only client (pydantic-ai, LangChain) answers
    ``yes`` or ``no`` after its own history; unchanged when it names none that is stored."""
    for item in reversed(items[:-1]):
        if type(item) is dict and item.get("role") == "assistant":
            found = _WAITING_IN.search(_item_text(item))
            if found is None:
                return body
            try:
                record = await threads.get(found.group(1))
            except RequestError:
                return body
            return {**body, "previous_response_id": record.id, "input": [items[-1]]}
    return body


def _server_tool(entry: Served, requests: list[InputRequest]) -> list[dict[str, Any]]:
    """The ``mcp`` tool entry that names the server label of the answer's approval requests
    (clients look the label up in the tools list: the Agents SDK, pydantic-ai)."""
    if not any(r.kind == "approval" for r in requests):
        return []
    return [
        {
            "type": "mcp",
            "server_label": entry.name,
            "server_description": entry.description or None,
            "require_approval": "always",
            "allowed_tools": sorted({r.call.name for r in requests if r.kind == "approval"}),
        }
    ]


def _without_own_server(body: dict[str, Any], entry: Served) -> dict[str, Any]:
    """`body` without ``mcp`` tools whose ``server_label`` is the served name: a client (the
    Agents SDK's ``HostedMCPTool``) declares one to take this server's approval requests;
    they name the served agent's own tools, which run here. Other tools are the client's."""
    tools = body.get("tools")
    if type(tools) is not list:
        return body
    kept = [
        t
        for t in tools
        if not (type(t) is dict and t.get("type") == "mcp" and t.get("server_label") == entry.name)
    ]
    return body if len(kept) == len(tools) else {**body, "tools": kept}


def _request_item(request: InputRequest, server: str) -> dict[str, Any]:
    arguments = json.dumps(request.to_json()["arguments"], ensure_ascii=False, default=str)
    if request.kind == "approval":
        return {
            "type": "mcp_approval_request",
            "id": request.request_id,
            "name": request.call.name,
            "arguments": arguments,
            "server_label": server,
        }
    return {
        "type": "function_call",
        "id": f"fc_{request.request_id}",
        "call_id": request.request_id,
        "name": request.call.name,
        "arguments": arguments,
        "status": "completed",
    }


def _message_item(
    response_id: str, text: str, annotations: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    return {
        "type": "message",
        "id": f"msg_{response_id[5:]}",
        "status": "completed",
        "role": "assistant",
        "content": [{"type": "output_text", "text": text, "annotations": annotations or []}],
    }


def _annotations(text: str, citations: Sequence[Citation]) -> list[dict[str, Any]]:
    """The answer's citations as the Responses API's ``file_citation`` annotations: the
    document as the file's name, the chunk as its id, at the end of the text they support."""
    return [
        {"type": "file_citation", "file_id": c.chunk, "filename": c.document, "index": len(text)}
        for c in citations
    ]


async def _turn(request: Request) -> _Turn:
    ctx = request.app.state.cantata
    body = await _implied_previous(await read_body(request), ctx.responses)
    entry = require_served(ctx.served, body)
    incoming = response_input(body, await _referenced(referenced_items(body), ctx.responses))
    previous_id = optional_str(body, "previous_response_id")
    store = optional_bool(body, "store", True)
    instructions = optional_str(body, "instructions")
    stream = optional_bool(body, "stream", False)
    sampling = sampling_options(body, entry)
    if instructions is not None and entry.kind == "workflow":
        raise RequestError(
            f"'instructions' apply to agents and teams; {entry.name!r} is a workflow: put "
            "them in the input instead",
            param="instructions",
        )
    tools = client_tools(_without_own_server(body, entry), entry, "responses")
    fmt = output_format(body, entry, "responses")
    previous = await ctx.responses.get(previous_id) if previous_id is not None else None
    history = await ctx.responses.history(previous) if previous is not None else []
    waiting = _waiting_threads(request.app)
    kept = waiting.take(previous.id) if previous is not None else None
    claim: AnswerClaim | None = None
    try:
        answered = response_answers(
            incoming, history, previous.id if previous else None, held=kept is not None
        )
        thread = kept or LocalThread()
        if history and kept is None:
            await thread.on_new_message(history)
        if answered is not incoming and previous is not None:
            # one answer per waiting response, across every process on the store
            lease = ctx.limits.request_timeout + CLAIM_SLACK
            where = f"response {previous.id!r}"
            claim = await AnswerClaim.take(ctx.store, _CLAIM + previous.id, where, lease=lease)
    except CantataError:
        if kept is not None and previous is not None:
            waiting.hold(previous.id, kept)
        raise
    return _Turn(
        entry,
        ctx.responses,
        answered,
        previous,
        thread,
        len(history),
        store,
        instructions,
        ResponseThreads.new_id(),
        stream,
        sampling,
        waiting,
        kept is not None,
        ctx.drain,
        tools,
        fmt,
        claim,
    )


def _waiting_threads(app: Starlette) -> WaitingThreads:
    """The app's threads whose workflow runs wait for an answer (made on first use)."""
    held: WaitingThreads | None = getattr(app.state, "cantata_responses_waiting", None)
    if held is None:
        ctx = app.state.cantata
        held = app.state.cantata_responses_waiting = WaitingThreads(
            abandon_after=ctx.limits.abandon_after, abandoned=ctx.metrics.abandoned
        )
    return held


async def create_response(request: Request) -> Response:
    """``POST /v1/responses``."""
    try:
        turn = await _turn(request)
    except CantataError as exc:
        return error_response(exc)
    if turn.stream:
        seq = itertools.count()
        # cut by the server's time limit, the stream still ends with `response.failed`
        request.scope[STREAM_FAILURE] = lambda exc: _failed(turn, exc, next(seq))
        return EventStream(_events(turn, seq))
    try:
        async with turn.drain.stoppable():
            response = await turn.entry.agent.run(
                turn.incoming, thread=turn.thread, **turn.run_options()
            )
        return JSONResponse(await turn.finish(response))
    except CantataError as exc:
        await turn.refused(exc)
        return error_response(exc)
    except BaseException as exc:  # cancelled, or a bug: the claim must not wait for its lease
        await turn.refused(exc)
        raise


async def get_response(request: Request) -> Response:
    """``GET /v1/responses/{id}``: a stored answer as it was given."""
    try:
        record = await request.app.state.cantata.responses.get(request.path_params["id"])
    except CantataError as exc:
        return error_response(exc)
    return JSONResponse(record.response)


async def delete_response(request: Request) -> Response:
    """``DELETE /v1/responses/{id}``: forget a stored answer."""
    response_id = request.path_params["id"]
    try:
        await request.app.state.cantata.responses.delete(response_id)
        await request.app.state.cantata.store.delete(_CLAIM + response_id)  # its answer's
    except CantataError as exc:
        return error_response(exc)
    return JSONResponse({"id": response_id, "object": "response", "deleted": True})


def _sse(kind: str, sequence: int, data: dict[str, Any]) -> bytes:
    payload = json.dumps({"type": kind, "sequence_number": sequence, **data}, ensure_ascii=False)
    return f"event: {kind}\ndata: {payload}\n\n".encode()


def _failed(turn: _Turn, exc: BaseException, sequence: int) -> bytes:
    """The ``response.failed`` event that ends the stream of `turn`, for `exc`."""
    failure = error_body(exc)["error"]
    failed = turn.body("", None, "failed")
    failed["error"] = {"code": failure["code"] or failure["type"], "message": failure["message"]}
    return _sse("response.failed", sequence, {"response": failed})


async def _events(turn: _Turn, seq: Iterator[int]) -> AsyncGenerator[bytes, None]:
    """The run's events (numbered from `seq`): the answer's message item opens with its
    first text (an answer that only calls the client's tools has none), the other items
    come whole at the end; a failure ends the stream with ``response.failed``."""
    item = _message_item(turn.response_id, "")
    where = {"item_id": item["id"], "output_index": 0, "content_index": 0}
    empty = {"type": "output_text", "text": "", "annotations": []}
    opening = [
        ("response.output_item.added", {"output_index": 0, "item": {**item, "content": []}}),
        ("response.content_part.added", {**where, "part": empty}),
    ]
    opening[0][1]["item"]["status"] = "in_progress"
    yield _sse("response.created", next(seq), {"response": turn.body("", None, "in_progress")})
    yield _sse("response.in_progress", next(seq), {"response": turn.body("", None, "in_progress")})
    stream = turn.entry.agent.run_stream(turn.incoming, thread=turn.thread, **turn.run_options())
    last: str | None = None
    opened = False
    try:
        async for update in turn.drain.guard(stream):
            text = update.text
            if update.role != "assistant" or not text or turn.format.whole:
                continue
            if opened and update.message_id != last:
                text = "\n\n" + text
            if not opened:
                for kind, data in opening:
                    yield _sse(kind, next(seq), data)
                opened = True
            last = update.message_id
            yield _sse(
                "response.output_text.delta", next(seq), {**where, "delta": text, "logprobs": []}
            )
        body = await turn.finish(stream.response)
    except CantataError as exc:
        await turn.refused(exc)
        yield _failed(turn, exc, next(seq))
        return
    except BaseException as exc:  # the client went away, or a bug
        await turn.refused(exc)
        raise
    finally:
        await stream.aclose()
    for index, done in enumerate(body["output"]):
        if done["type"] == "message":
            if not opened:
                for kind, data in opening:
                    yield _sse(kind, next(seq), data)
            part = done["content"][0]
            if turn.format.whole and part["text"]:
                delta = {**where, "delta": part["text"], "logprobs": []}
                yield _sse("response.output_text.delta", next(seq), delta)
            for n, annotation in enumerate(part["annotations"]):
                added = {**where, "annotation_index": n, "annotation": annotation}
                yield _sse("response.output_text.annotation.added", next(seq), added)
            yield _sse(
                "response.output_text.done",
                next(seq),
                {**where, "text": part["text"], "logprobs": []},
            )
            yield _sse("response.content_part.done", next(seq), {**where, "part": part})
        else:  # a call of the client's tool, a request for a person
            yield _sse(
                "response.output_item.added", next(seq), {"output_index": index, "item": done}
            )
        yield _sse("response.output_item.done", next(seq), {"output_index": index, "item": done})
    yield _sse(f"response.{body['status']}", next(seq), {"response": body})
