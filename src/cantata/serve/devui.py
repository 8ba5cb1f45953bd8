"""The dev UI: a page at ``/`` to try what a server serves, and its JSON/SSE API.

The page (``static/devui``: plain HTML, CSS and JS shipped in the package, nothing fetched
from elsewhere) lists the served agents, workflows and teams; chats with any of them over
a streamed answer; runs a workflow or team and follows its events live (server-sent
events), with its graph, a team's routing decisions, pending requests for input to answer
and the run's checkpoints to resume from.

API (all under ``/devui/api``): ``GET entries``; ``POST chat/{name}`` (SSE); ``POST
runs/{name}``; ``GET runs``; ``GET run/{id}``; ``GET run/{id}/events`` (SSE);
``POST run/{id}/answers``; ``GET run/{id}/checkpoints``; ``POST run/{id}/resume``;
``POST login`` and ``POST logout``.

On a server with a token the page asks for it once and sends it to ``login`` as a bearer
token; the server (whose token check has just passed it) answers with the token cookie
(`TOKEN_COOKIE`): ``HttpOnly`` (no script reads it, not even one on another port of this
host), ``SameSite=Strict``, ``Path=/devui/api`` (only the page's API calls carry it), and
``Secure`` when the page came over HTTPS. Its value is the token percent-encoded, so a
token of any characters survives. Writes carry no CSRF token: they are JSON POSTs, which
a page on another origin cannot send (see `guard`). The page's own policy
(`PAGE_CSP`) lets it load only its own script and style, connect only here, and be
framed nowhere.

Chats and runs live in the server's store (``--store``), so on a durable store they are
still there after a restart: a chat goes on, and a past run shows its events and
checkpoints and resumes from them (see `devui_runs` for what is kept and its bounds).
Chats and runs belong to the identity that started them (`identity`): another identity's
list does not show them and their ids are a 404 for it.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from ..agents import LocalThread, StateStoreMessageStore
from ..core import SerializationError, current_owner, loads_json, new_id
from ..workflows import CheckpointStore, StateStoreCheckpointStore
from .admission import AdmittedRoute, RouteWork
from .app import Contribution, ServeContext
from .auth import TOKEN_COOKIE
from .devui_graph import graph_of
from .devui_runs import DevRun, RunRegistry, parse_answer
from .errors import RequestError, error_response
from .human_input import CLAIM_SLACK, input_requests, typed_answer
from .served import Served

__all__ = ["COOKIE_PATH", "PAGE_CSP", "STATIC_DIR", "contribute"]

STATIC_DIR = Path(__file__).parent / "static" / "devui"
"""The page's files, shipped in the package."""

PAGE_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
"""The dev UI page's Content-Security-Policy: its own files only, and never in a frame."""
COOKIE_PATH = "/devui/api"
"""Where the browser sends the token cookie: the page's API, nothing else."""
_PAGE_HEADERS = {"Cache-Control": "no-store", "Content-Security-Policy": PAGE_CSP}

_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
_KEEPALIVE = 10.0
_RETRY_MS = 500
_SSE = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
_CHAT_WORK = RouteWork("model")  # a chat turn runs the entry
_FOLLOW_WORK = RouteWork("follow")  # a run's events follow a run started before


def contribute(ctx: ServeContext) -> Contribution:
    """The page at ``/``, its assets and its API."""
    ui = _DevUI(ctx)

    @asynccontextmanager
    async def lifespan() -> AsyncIterator[None]:
        try:
            yield
        finally:
            await ui.close()

    routes = [
        Route("/", ui.page, methods=["GET"]),
        Mount("/devui/static", app=StaticFiles(directory=STATIC_DIR), name="devui-static"),
        Route("/devui/api/login", _login, methods=["POST"]),
        Route("/devui/api/logout", _logout, methods=["POST"]),
        Route("/devui/api/entries", ui.entries, methods=["GET"]),
        AdmittedRoute("/devui/api/chat/{name}", ui.chat, methods=["POST"], work=_CHAT_WORK),
        Route("/devui/api/runs", ui.list_runs, methods=["GET"]),
        Route("/devui/api/runs/{name}", ui.start_run, methods=["POST"]),
        Route("/devui/api/run/{run_id}", ui.get_run, methods=["GET"]),
        AdmittedRoute(
            "/devui/api/run/{run_id}/events", ui.run_events, methods=["GET"], work=_FOLLOW_WORK
        ),
        Route("/devui/api/run/{run_id}/answers", ui.answer, methods=["POST"]),
        Route("/devui/api/run/{run_id}/checkpoints", ui.checkpoints, methods=["GET"]),
        Route("/devui/api/run/{run_id}/resume", ui.resume, methods=["POST"]),
    ]
    return Contribution(routes=routes, lifespan=lifespan)


def _bearer(request: Request) -> bytes | None:
    for name, value in request.scope.get("headers", ()):
        if name == b"authorization":
            scheme, _, rest = value.partition(b" ")
            token = bytes(rest).strip()
            if bytes(scheme).lower() == b"bearer" and token:
                return token
    return None


async def _login(request: Request) -> Response:
    """Set the token cookie to the bearer token this request passed the token check with
    (on a server without a token, nothing is checked and the cookie changes nothing)."""
    token = _bearer(request)
    if token is None:
        err = RequestError("send the token as 'Authorization: Bearer <token>'", status=400)
        return error_response(err)
    response = Response(status_code=204, headers={"Cache-Control": "no-store"})
    response.set_cookie(
        TOKEN_COOKIE,
        quote(token, safe=""),
        path=COOKIE_PATH,
        secure=request.url.scheme == "https",
        httponly=True,
        samesite="strict",
    )
    return response


async def _logout(request: Request) -> Response:
    """Clear the token cookie."""
    response = Response(status_code=204, headers={"Cache-Control": "no-store"})
    response.delete_cookie(
        TOKEN_COOKIE,
        path=COOKIE_PATH,
        secure=request.url.scheme == "https",
        httponly=True,
        samesite="strict",
    )
    return response


def _sse(data: Mapping[str, Any], event_id: int | None = None) -> str:
    head = "" if event_id is None else f"id: {event_id}\n"
    return f"{head}data: {json.dumps(data)}\n\n"


async def _body(request: Request) -> dict[str, Any]:
    try:
        body = loads_json(await request.body() or b"{}")
    except SerializationError as exc:
        raise RequestError(f"the request body is not JSON this server reads: {exc}") from exc
    if not isinstance(body, dict):
        raise RequestError(f"the request body must be a JSON object, not {type(body).__name__}")
    return body


def _text(body: Mapping[str, Any], key: str) -> str:
    value = body.get(key)
    if not isinstance(value, str) or not value.strip():
        raise RequestError(f"{key!r} must be a non-empty string", param=key)
    return value


def _guarded(handler: Any) -> Any:
    async def run(self: _DevUI, request: Request) -> Response:
        try:
            response: Response = await handler(self, request)
        except RequestError as exc:
            return error_response(exc)
        return response

    run.__doc__ = handler.__doc__
    return run


class _DevUI:
    """The handlers, over one served set, store and run registry."""

    def __init__(self, ctx: ServeContext) -> None:
        self.ctx = ctx
        self._registries: dict[str | None, RunRegistry] = {}
        self._store = StateStoreCheckpointStore(ctx.store)

    @property
    def runs(self) -> RunRegistry:
        """The runs of the identity this request is from (each has its own, in memory as in
        the store: one identity's runs are not in another's list)."""
        owner = current_owner()
        registry = self._registries.get(owner)
        if registry is None:
            registry = self._registries[owner] = RunRegistry(self.ctx.store, self._restore)
        return registry

    async def close(self) -> None:
        """Cancel every identity's runs still going."""
        await asyncio.gather(*(r.close() for r in list(self._registries.values())))

    def _restore(self, record: dict[str, Any], events: list[Any]) -> DevRun | None:
        entry = self.ctx.served.get(str(record.get("name")))
        if entry is None or entry.kind == "agent":
            return None  # no longer served here
        return DevRun.restore(entry, self._checkpoints_of(entry), self.ctx.store, record, events)

    def _new_run(self, entry: Served, store: CheckpointStore) -> DevRun:
        return DevRun(entry, store, state=self.ctx.store)

    def _entry(self, name: str, *, runnable: bool = False) -> Served:
        entry = self.ctx.served.get(name)
        if entry is None:
            raise RequestError(
                f"nothing is served as {name!r}; served: {sorted(self.ctx.served)}",
                status=404,
                param="name",
            )
        if runnable and entry.kind == "agent":
            raise RequestError(
                f"{name!r} is an agent: chat with it; runs are for workflows and teams",
                param="name",
            )
        return entry

    def _checkpoints_of(self, entry: Served) -> CheckpointStore:
        workflow = entry.target if entry.kind == "workflow" else entry.target.workflow
        own: CheckpointStore | None = workflow.checkpoint_store
        return own or self._store

    async def page(self, request: Request) -> Response:
        """The page."""
        return FileResponse(STATIC_DIR / "index.html", headers=_PAGE_HEADERS)

    @_guarded
    async def entries(self, request: Request) -> Response:
        """What is served, with the graphs of workflows and teams."""
        out = []
        for entry in self.ctx.served.values():
            item: dict[str, Any] = {
                "name": entry.name,
                "kind": entry.kind,
                "description": entry.description or getattr(entry.target, "description", ""),
            }
            if entry.kind == "workflow":
                item["graph"] = graph_of(entry.target)
            elif entry.kind == "team":
                item["graph"] = graph_of(entry.target.workflow)
                item["participants"] = list(entry.target.participant_names)
            out.append(item)
        return JSONResponse({"entries": out})

    @_guarded
    async def chat(self, request: Request) -> Response:
        """One streamed turn of a chat; the thread lives in the server's store."""
        entry = self._entry(request.path_params["name"])
        body = await _body(request)
        message = _text(body, "message")
        chat_id = body.get("chat_id") or new_id()[:16]
        if not isinstance(chat_id, str) or not _ID.fullmatch(chat_id):
            raise RequestError(
                f"chat_id {chat_id!r} must be 1-64 letters, digits, '_' or '-'", param="chat_id"
            )
        thread = LocalThread(
            StateStoreMessageStore(self.ctx.store, chat_id, prefix="devui:chat:"), id=chat_id
        )
        # a pending approval is answered by "yes" or "no", once (see `typed_answer`)
        lease = self.ctx.limits.request_timeout + CLAIM_SLACK
        incoming, claim = await typed_answer(
            self.ctx.store,
            f"devui:{chat_id}",
            f"chat {chat_id!r}",
            await thread.get_messages(),
            message,
            lease=lease,
        )

        async def stream() -> AsyncIterator[str]:
            yield _sse({"chat_id": chat_id})
            updates = None
            try:  # stopped at the server's drain with ServerStoppingError, shown as an error
                updates = entry.agent.run_stream(incoming, thread=thread)
                async for update in self.ctx.drain.guard(updates):
                    if update.text:
                        yield _sse({"text": update.text, "author": update.author_name})
                if claim is not None:
                    await claim.answered(f"chat {chat_id!r}")
                asked = input_requests(updates.response.messages)
                if asked:  # what the run waits for, as the page shows text
                    yield _sse({"text": "\n" + "\n".join(r.describe() for r in asked)})
                yield _sse({"done": True, "text": updates.response.text})
            except Exception as exc:  # the page shows it in the chat
                if claim is not None:
                    await claim.failed(str(exc))
                yield _sse({"error": f"{type(exc).__name__}: {exc}"})
            finally:
                if updates is not None:
                    await updates.aclose()

        return StreamingResponse(stream(), media_type="text/event-stream", headers=_SSE)

    @_guarded
    async def list_runs(self, request: Request) -> Response:
        """The runs kept (live ones, and past ones from the store), oldest first."""
        return JSONResponse({"runs": await self.runs.summaries()})

    @_guarded
    async def start_run(self, request: Request) -> Response:
        """Start a run of a workflow or team on the text given; follow it at its events."""
        entry = self._entry(request.path_params["name"], runnable=True)
        text = _text(await _body(request), "input")
        run = await self.runs.add(self._new_run(entry, self._checkpoints_of(entry)))
        if entry.kind == "workflow":
            run.start(
                lambda r: _workflow_stream(
                    r, entry.target.run_stream(text, checkpoint_store=r.store)
                )
            )
        else:
            run.session = entry.target.create_session(checkpoint_store=run.store)
            run.start(lambda r: _team_stream(r, r.session.run_stream(text)))
        return JSONResponse(run.summary(), status_code=201)

    @_guarded
    async def get_run(self, request: Request) -> Response:
        """One run's summary (status, pending requests)."""
        run = await self.runs.get(request.path_params["run_id"])
        return JSONResponse(run.summary())

    @_guarded
    async def run_events(self, request: Request) -> Response:
        """The run's events as server-sent events, from ``Last-Event-ID`` (or ``after``)."""
        run = await self.runs.get(request.path_params["run_id"])
        last = request.headers.get("last-event-id") or request.query_params.get("after")
        try:
            after = int(last) + 1 if last is not None else 0
        except ValueError as exc:
            raise RequestError(f"Last-Event-ID {last!r} is not an event number") from exc

        async def stream() -> AsyncIterator[str]:
            yield f"retry: {_RETRY_MS}\n\n"  # a stream cut at the time limit comes back soon
            async for index, data in run.follow(after, wait=_KEEPALIVE):
                yield ": keep-alive\n\n" if index < 0 else _sse(data, index)
            yield f"event: end\ndata: {json.dumps(run.summary())}\n\n"

        return StreamingResponse(stream(), media_type="text/event-stream", headers=_SSE)

    @_guarded
    async def answer(self, request: Request) -> Response:
        """Answer pending requests for input (``{"answers": {request_id: text}}``)."""
        run = await self.runs.get(request.path_params["run_id"])
        answers = (await _body(request)).get("answers")
        if not isinstance(answers, dict) or not answers:
            raise RequestError("'answers' must map request ids to answers", param="answers")
        run.check_live()
        pending = {r.request_id: r for r in run.pending}
        unknown = sorted(set(answers) - set(pending))
        if unknown or run.busy:
            raise RequestError(
                f"run {run.id!r} has no pending requests {unknown}; pending: {sorted(pending)}"
                if unknown
                else f"run {run.id!r} is still going; answer once it waits",
                status=409,
                param="answers",
            )
        values = {rid: parse_answer(pending[rid], str(text)) for rid, text in answers.items()}
        if run.served.kind == "workflow":
            try:
                stream = run.workflow_run.send_responses_stream(values)
            except Exception as exc:
                raise RequestError(f"{type(exc).__name__}: {exc}", param="answers") from exc
            run.start(lambda r: _workflow_stream(r, stream))
        else:
            run.start(lambda r: _team_answers(r, values))
        return JSONResponse(run.summary())

    @_guarded
    async def checkpoints(self, request: Request) -> Response:
        """The checkpoints of the run (in superstep order)."""
        run = await self.runs.get(request.path_params["run_id"])
        if run.run_id is None:
            return JSONResponse({"checkpoints": []})
        found = await run.store.list_checkpoints(run_id=run.run_id)
        return JSONResponse(
            {
                "checkpoints": [
                    {
                        "checkpoint_id": c.checkpoint_id,
                        "superstep": c.superstep,
                        "status": c.status,
                        "created_at": c.created_at,
                        "pending": c.pending_request_ids,
                    }
                    for c in found
                ]
            }
        )

    @_guarded
    async def resume(self, request: Request) -> Response:
        """A new dev UI run continuing the run from one of its checkpoints."""
        old = await self.runs.get(request.path_params["run_id"])
        checkpoint_id = _text(await _body(request), "checkpoint_id")
        known = [c.checkpoint_id for c in await old.store.list_checkpoints(run_id=old.run_id)]
        if old.run_id is None or checkpoint_id not in known:
            raise RequestError(
                f"run {old.id!r} has no checkpoint {checkpoint_id!r}; its checkpoints: {known}",
                status=404,
                param="checkpoint_id",
            )
        entry = old.served
        run = await self.runs.add(self._new_run(entry, old.store))
        if entry.kind == "workflow":
            workflow = entry.target
            run.start(
                lambda r: _workflow_stream(
                    r, workflow.resume_stream(checkpoint_id, checkpoint_store=r.store)
                )
            )
        else:
            run.start(lambda r: _team_resume(r, checkpoint_id))
        return JSONResponse(run.summary(), status_code=201)


async def _workflow_stream(run: DevRun, stream: Any) -> AsyncIterator[Any]:
    async with stream:
        async for event in stream:
            yield event
    result = stream.result
    run.workflow_run = result.run
    run.run_id = result.run_id
    run.pending = list(result.pending_requests)
    run.status = result.status


async def _team_stream(run: DevRun, items: AsyncIterator[Any]) -> AsyncIterator[Any]:
    async for item in items:
        if run.run_id is None:
            run.run_id = run.session.run_id
        yield item
    _team_done(run)


def _team_done(run: DevRun) -> None:
    run.run_id = run.session.run_id
    run.pending = list(run.session.pending_requests)
    run.status = "idle_with_pending_requests" if run.pending else "idle"


async def _team_answers(run: DevRun, values: dict[str, Any]) -> AsyncIterator[Any]:
    yield await run.session.send_responses(values)
    _team_done(run)


async def _team_resume(run: DevRun, checkpoint_id: str) -> AsyncIterator[Any]:
    team = run.served.target
    run.session = await team.resume(checkpoint_id, checkpoint_store=run.store)
    async for item in _team_stream(run, run.session.run_stream()):
        yield item
