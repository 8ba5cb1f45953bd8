"""``POST /v1/chat/completions``: a served agent, workflow or team answers as a model.

Each request is one run on a fresh thread holding the request's messages (the API is
stateless: the client sends the whole conversation). Streamed, the answer's text goes out
as ``chat.completion.chunk`` events as the run produces it, then ``[DONE]``; a failure after
the stream started is sent as an ``error`` event, which OpenAI clients raise, and then
``[DONE]``, as OpenAI ends its streams (a run the server stops at shutdown: code
``server_shutting_down``). With ``stream_options.include_usage`` the last chunk before
``[DONE]`` carries the usage (no choices); without it, no chunk does.

Tools the client sends (``tools``) are declared to a served agent's model for this request
(see `openai_tools`): when the model calls one, the answer carries ``tool_calls`` (finish
reason ``tool_calls``) and the client's next request, with the results as ``tool``
messages after the assistant message that holds the calls, continues the conversation.
The finish reason is ``length`` when ``max_tokens`` cut the answer.

A run that stops for a person (a tool's approval, a workflow's request; see `human_input`) is
answered with a 409 (code ``input_required``) naming what it waits for: this stateless API
has no way to carry the answer back, so the error says to use ``/v1/responses`` or A2A.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncGenerator
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ..agents import AgentResponse, LocalThread
from ..core import CantataError, FunctionCallContent, Message, Usage, new_id
from .drain import Drain
from .errors import RequestError, error_body, error_response
from .event_stream import EventStream
from .human_input import input_requests
from .openai_format import OutputFormat, output_format
from .openai_messages import (
    answer_text,
    chat_messages,
    optional_bool,
    read_body,
    require_served,
    sampling_options,
)
from .openai_tools import ClientTools, arguments_text, client_tools
from .served import Served

__all__ = ["chat_completions"]


async def chat_completions(request: Request) -> Response:
    """Run the served object named by ``model`` on ``messages``."""
    try:
        body = await read_body(request)
        entry = require_served(request.app.state.cantata.served, body)
        messages = chat_messages(body)
        stream = optional_bool(body, "stream", False)
        include_usage = _include_usage(body)
        _refuse_unsupported(body)
        tools = client_tools(body, entry, "chat")
        fmt = output_format(body, entry, "chat")
        options = {**sampling_options(body, entry), **tools.run_options(), **fmt.run_options()}
    except CantataError as exc:
        return error_response(exc)
    completion_id = f"chatcmpl-{new_id().replace('-', '')}"
    drain: Drain = request.app.state.cantata.drain
    if stream:
        return EventStream(
            _chunks(entry, messages, completion_id, include_usage, options, tools, fmt, drain)
        )
    try:
        async with drain.stoppable():
            response = await entry.agent.run(messages, thread=LocalThread(), **options)
        _refuse_waiting(entry, response)
    except CantataError as exc:
        return error_response(exc)
    return JSONResponse(_completion(entry, response, completion_id, tools, fmt))


def _refuse_waiting(entry: Served, response: AgentResponse) -> None:
    """A run that waits for a person cannot answer here: a 409 says what it waits for."""
    requests = input_requests(response.messages)
    if requests:
        what = "; ".join(r.describe() for r in requests)[:600]
        raise RequestError(
            f"{entry.kind} {entry.name!r} waits for a person ({what}); "
            "chat completions cannot carry the answer back: use /v1/responses (answer with "
            "previous_response_id) or A2A",
            status=409,
            code="input_required",
        )


def _include_usage(body: dict[str, Any]) -> bool:
    options = body.get("stream_options")
    if options is None:
        return False
    if type(options) is not dict:
        raise RequestError("'stream_options' must be an object", param="stream_options")
    return optional_bool(options, "include_usage", False)


def _refuse_unsupported(body: dict[str, Any]) -> None:
    n = body.get("n", 1)
    if n is not None and n != 1:
        raise RequestError("'n' must be 1: a served object gives one answer per request", param="n")


def _finish_reason(response: AgentResponse, calls: list[FunctionCallContent]) -> str:
    """OpenAI's finish reason: ``tool_calls`` when the client has calls to run, the model's
    ``length`` or ``content_filter``, else ``stop`` (the run's own reasons are not OpenAI's)."""
    if calls:
        return "tool_calls"
    if response.finish_reason in ("length", "content_filter"):
        return response.finish_reason
    return "stop"


def _tool_calls(calls: list[FunctionCallContent], *, indexed: bool = False) -> list[dict[str, Any]]:
    return [
        {
            **({"index": i} if indexed else {}),
            "id": call.call_id,
            "type": "function",
            "function": {"name": call.name, "arguments": arguments_text(call)},
        }
        for i, call in enumerate(calls)
    ]


def _usage(usage: Usage | None) -> dict[str, int]:
    u = usage or Usage()
    return {
        "prompt_tokens": u.input_tokens,
        "completion_tokens": u.output_tokens,
        "total_tokens": u.total_tokens,
    }


def _completion(
    entry: Served,
    response: AgentResponse,
    completion_id: str,
    tools: ClientTools,
    fmt: OutputFormat,
) -> dict[str, Any]:
    calls = tools.calls(response)
    text = fmt.answer(response, answer_text(response))
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if calls:
        message["content"] = message["content"] or None
        message["tool_calls"] = _tool_calls(calls)
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": entry.name,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": _finish_reason(response, calls),
                "logprobs": None,
            }
        ],
        "usage": _usage(response.usage),
    }


def _event(data: Any) -> bytes:
    return f"data: {json.dumps(data, ensure_ascii=False)}\n\n".encode()


async def _chunks(
    entry: Served,
    messages: list[Message],
    completion_id: str,
    include_usage: bool,
    options: dict[str, Any],
    tools: ClientTools,
    fmt: OutputFormat,
    drain: Drain,
) -> AsyncGenerator[bytes, None]:
    created = int(time.time())

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        return _event(
            {
                "id": completion_id,
                "object": "chat.completion.chunk",
                "created": created,
                "model": entry.name,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }
        )

    yield chunk({"role": "assistant", "content": ""})
    stream = entry.agent.run_stream(messages, thread=LocalThread(), **options)
    last_message: str | None = None
    wrote = False
    try:
        async for update in drain.guard(stream):
            text = update.text
            if update.role != "assistant" or not text or fmt.whole:
                continue
            if wrote and update.message_id != last_message:
                text = "\n\n" + text  # a new message (another speaker, another output)
            last_message, wrote = update.message_id, True
            yield chunk({"content": text})
        response = stream.response
        _refuse_waiting(entry, response)
    except CantataError as exc:
        yield _event(error_body(exc))
        yield b"data: [DONE]\n\n"
        return
    finally:
        await stream.aclose()
    calls = tools.calls(response)
    whole = fmt.answer(response, "") if fmt.whole else ""
    if whole:
        yield chunk({"content": whole})
    if calls:
        yield chunk({"tool_calls": _tool_calls(calls, indexed=True)})
    yield chunk({}, _finish_reason(response, calls))
    if include_usage:
        yield _event(
            {
                "id": completion_id,
                "object": "chat.completion.chunk",
                "created": created,
                "model": entry.name,
                "choices": [],
                "usage": _usage(response.usage),
            }
        )
    yield b"data: [DONE]\n\n"
