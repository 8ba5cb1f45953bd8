"""The OpenAI-compatible routes: models, chat completions, responses."""

from __future__ import annotations

import json
import time

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from .admission import AdmittedRoute, RouteWork
from .app import Contribution, ServeContext
from .errors import RequestError, error_body, error_response
from .openai_chat import chat_completions
from .openai_responses import create_response, delete_response, get_response
from .served import Served

__all__ = ["CHAT_WORK", "RESPONSES_WORK", "contribute"]


def _chat_stream_error(exc: BaseException) -> bytes:
    # OpenAI ends a chat stream with [DONE], failed or not
    return f"data: {json.dumps(error_body(exc))}\n\ndata: [DONE]\n\n".encode()


CHAT_WORK = RouteWork("model", stream_error=_chat_stream_error)
"""A chat completion runs a model; its stream ends with ``[DONE]`` after an error too."""
RESPONSES_WORK = RouteWork("model")
"""A response runs a model; its stream ends with the ``error`` event."""


def contribute(ctx: ServeContext) -> Contribution:
    """The routes under ``/v1``."""
    started = int(time.time())

    def model(entry: Served) -> dict[str, object]:
        return {
            "id": entry.name,
            "object": "model",
            "created": started,
            "owned_by": "cantata",
            "cantata_kind": entry.kind,
            "description": entry.description,
        }

    async def list_models(request: Request) -> Response:
        return JSONResponse({"object": "list", "data": [model(e) for e in ctx.served.values()]})

    async def get_model(request: Request) -> Response:
        name = request.path_params["name"]
        entry = ctx.served.get(name)
        if entry is None:
            return error_response(
                RequestError(
                    f"model {name[:80]!r} is not served here; GET /v1/models lists what is",
                    status=404,
                    param="model",
                    code="model_not_found",
                )
            )
        return JSONResponse(model(entry))

    return Contribution(
        routes=[
            Route("/v1/models", list_models, methods=["GET"]),
            Route("/v1/models/{name:path}", get_model, methods=["GET"]),
            AdmittedRoute(
                "/v1/chat/completions", chat_completions, methods=["POST"], work=CHAT_WORK
            ),
            AdmittedRoute("/v1/responses", create_response, methods=["POST"], work=RESPONSES_WORK),
            Route("/v1/responses/{id}", get_response, methods=["GET"]),
            Route("/v1/responses/{id}", delete_response, methods=["DELETE"]),
        ]
    )
