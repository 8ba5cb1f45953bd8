"""The dev UI's JSON/SSE API on a real uvicorn: entries with graphs, a streamed chat whose
thread lives in the server's store, workflow runs followed live, answered, checkpointed and
resumed, team runs with their routing decisions, and typed errors."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from cantata.agents import ChatAgent
from cantata.models import ScriptedChatClient
from cantata.serve import ServedSet
from cantata.serve.devui_graph import graph_of
from cantata.stores import MemoryStore, SQLiteStore
from cantata.teams import GroupChat, RoundRobin
from cantata.workflows import (
    Executor,
    Workflow,
    WorkflowBuilder,
    WorkflowContext,
    executor,
    handler,
    response_handler,
)

from ._servers import cli_server, count_turns, echo_agent, serving

TIMEOUT = httpx.Timeout(30.0)


class Review(Executor):
    """Asks a person whether to publish the joined draft."""

    @handler
    async def ask(self, parts: list[str], ctx: WorkflowContext[str]) -> None:
        ctx.set_executor_state(" + ".join(sorted(parts)))
        await ctx.request_info(f"publish {ctx.get_executor_state()}?", response_type=str)

    @response_handler
    async def answered(self, question: str, answer: str, ctx: WorkflowContext[str]) -> None:
        await ctx.send_message(f"{ctx.get_executor_state()} ({answer})")


def build_review() -> Workflow:
    """draft -> (tone, facts) -> review (asks a person) -> publish (yields)."""

    @executor
    async def draft(text: str, ctx: WorkflowContext[str]) -> None:
        await ctx.send_message(text.upper())

    @executor
    async def tone(text: str, ctx: WorkflowContext[str]) -> None:
        await ctx.send_message(f"tone({text})")

    @executor
    async def facts(text: str, ctx: WorkflowContext[str]) -> None:
        await ctx.send_message(f"facts({text})")

    @executor
    async def publish(text: str, ctx: WorkflowContext[None, str]) -> None:
        await ctx.yield_output(f"published {text}")

    review = Review("review")
    return (
        WorkflowBuilder(
            draft, name="review", description="Drafts, reviews with a person, publishes."
        )
        .add_fan_out_edges(draft, [tone, facts])
        .add_fan_in_edges([tone, facts], review)
        .add_edge(review, publish)
        .build()
    )


def build_team() -> GroupChat:
    agents = [
        ChatAgent(ScriptedChatClient(count_turns, chunk_size=4), name=n, description=f"{n} writer")
        for n in ("alice", "bob")
    ]
    return GroupChat(
        agents,
        speaker=RoundRobin(),
        max_turns=3,
        name="pair",
        description="Two writers take turns.",
    )


def served() -> dict[str, Any]:
    return {"echo": echo_agent(), "review": build_review(), "pair": build_team()}


@pytest.fixture
async def url() -> AsyncIterator[str]:
    async with MemoryStore() as store, serving(served(), store=store) as base:
        yield base


async def sse(client: httpx.AsyncClient, method: str, path: str, **kw: Any) -> list[dict[str, Any]]:
    """Every data event of a stream (the closing ``end`` event too, tagged ``_end``)."""
    out: list[dict[str, Any]] = []
    async with client.stream(method, path, **kw) as res:
        assert res.status_code == 200, await res.aread()
        assert res.headers["content-type"].startswith("text/event-stream")
        event = "message"
        async for line in res.aiter_lines():
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: "):
                data = json.loads(line[6:])
                out.append({**data, "_end": True} if event == "end" else data)
                event = "message"
    return out


async def run_to_stop(
    client: httpx.AsyncClient, run_id: str, after: int = -1
) -> list[dict[str, Any]]:
    return await sse(client, "GET", f"/devui/api/run/{run_id}/events", params={"after": after})


def test_graph_layers_follow_the_edges_and_ignore_back_edges() -> None:
    graph = graph_of(build_review())
    layers = {n["id"]: n["layer"] for n in graph["nodes"]}
    assert layers == {"draft": 0, "tone": 1, "facts": 1, "review": 2, "publish": 3}
    assert {(e["source"], e["target"]) for e in graph["edges"]} >= {
        ("draft", "tone"),
        ("facts", "review"),
    }
    assert graph["width"] == 2 and graph["depth"] == 4
    assert graph["mermaid"].startswith("flowchart TD")
    team = graph_of(build_team().workflow)  # a star with edges back to the manager
    tlayers = {n["id"]: n["layer"] for n in team["nodes"]}
    assert tlayers["team.manager"] == 0 and tlayers["alice"] == tlayers["bob"] == 1


async def test_page_and_assets_are_served_by_the_package(url: str) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=TIMEOUT) as client:
        page = await client.get("/")
        assert page.status_code == 200 and "text/html" in page.headers["content-type"]
        assert "/devui/static/app.js" in page.text and "http" not in page.text.split("<body>")[1]
        for asset in ("app.js", "app.css"):
            res = await client.get(f"/devui/static/{asset}")
            assert res.status_code == 200 and len(res.text) > 500
            assert "https://" not in res.text and "cdn" not in res.text.lower()
        entries = (await client.get("/devui/api/entries")).json()["entries"]
        kinds = {e["name"]: e["kind"] for e in entries}
        assert kinds == {"echo": "agent", "review": "workflow", "pair": "team"}
        pair = next(e for e in entries if e["name"] == "pair")
        assert pair["participants"] == ["alice", "bob"] and pair["graph"]["nodes"]


async def test_chat_streams_and_keeps_its_thread_in_the_store(url: str) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=TIMEOUT) as client:
        first = await sse(client, "POST", "/devui/api/chat/echo", json={"message": "hello there"})
        chat_id = first[0]["chat_id"]
        chunks = [e["text"] for e in first if "text" in e and not e.get("done")]
        assert len(chunks) > 1 and "".join(chunks) == "turn 1: hello there"
        second = await sse(
            client, "POST", "/devui/api/chat/echo", json={"message": "again", "chat_id": chat_id}
        )
        assert second[-1] == {"done": True, "text": "turn 2: again"}


async def test_workflow_run_answer_checkpoints_and_resume(url: str) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=TIMEOUT) as client:
        started = await client.post("/devui/api/runs/review", json={"input": "note"})
        assert started.status_code == 201
        run = started.json()
        events = await run_to_stop(client, run["id"])
        types = [e.get("type") for e in events]
        assert types[0] == "WorkflowStartedEvent" and "RequestInfoEvent" in types
        end = events[-1]
        assert end["_end"] and end["status"] == "idle_with_pending_requests"
        (request,) = end["pending"]
        assert (
            request["executor_id"] == "review"
            and "FACTS(NOTE) + TONE(NOTE)" in request["data"].upper()
        )

        answered = await client.post(
            f"/devui/api/run/{run['id']}/answers", json={"answers": {request["request_id"]: "yes"}}
        )
        assert answered.status_code == 200, answered.text
        more = await run_to_stop(client, run["id"], after=len(events) - 2)
        outputs = [e["data"] for e in more if e.get("type") == "OutputEvent"]
        assert outputs == ["published facts(NOTE) + tone(NOTE) (yes)"]
        assert more[-1]["status"] == "idle" and more[-1]["pending"] == []

        cps = (await client.get(f"/devui/api/run/{run['id']}/checkpoints")).json()["checkpoints"]
        waiting = [c for c in cps if c["pending"]]
        assert cps and waiting
        resumed = await client.post(
            f"/devui/api/run/{run['id']}/resume",
            json={"checkpoint_id": waiting[0]["checkpoint_id"]},
        )
        assert resumed.status_code == 201, resumed.text
        again = await run_to_stop(client, resumed.json()["id"])
        assert again[0]["type"] == "WorkflowStartedEvent" and again[0]["resumed_from"]
        assert again[-1]["status"] == "idle_with_pending_requests"
        assert again[-1]["run_id"] == end["run_id"]


async def test_team_run_streams_routing_decisions(url: str) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=TIMEOUT) as client:
        run = (await client.post("/devui/api/runs/pair", json={"input": "write"})).json()
        events = await run_to_stop(client, run["id"])
        routing = [e for e in events if e.get("type") == "RoutingEvent"]
        assert [r["choice"] for r in routing] == ["alice", "bob", "alice"]
        assert all(r["candidates"] == ["alice", "bob"] for r in routing)
        assert any(e.get("type") == "TaskResult" for e in events)
        assert events[-1]["status"] == "idle"
        cps = (await client.get(f"/devui/api/run/{run['id']}/checkpoints")).json()["checkpoints"]
        assert cps


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "words"),
    [
        ("POST", "/devui/api/chat/nobody", {"message": "hi"}, 404, ["nobody", "echo"]),
        ("POST", "/devui/api/chat/echo", {"message": ""}, 400, ["message"]),
        ("POST", "/devui/api/chat/echo", {"message": "x", "chat_id": "../x"}, 400, ["chat_id"]),
        ("POST", "/devui/api/runs/echo", {"input": "x"}, 400, ["echo", "agent"]),
        ("GET", "/devui/api/run/nope/events", None, 404, ["nope"]),
        ("POST", "/devui/api/run/nope/resume", {"checkpoint_id": "c"}, 404, ["nope"]),
    ],
)
async def test_bad_requests_get_typed_errors(
    url: str, method: str, path: str, body: Any, status: int, words: list[str]
) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=TIMEOUT) as client:
        res = await client.request(method, path, json=body)
        assert res.status_code == status
        message = res.json()["error"]["message"]
        assert all(w in message for w in words), message


async def test_unknown_answer_and_checkpoint_are_refused(url: str) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=TIMEOUT) as client:
        run = (await client.post("/devui/api/runs/review", json={"input": "n"})).json()
        await run_to_stop(client, run["id"])
        res = await client.post(
            f"/devui/api/run/{run['id']}/answers", json={"answers": {"zz": "y"}}
        )
        assert res.status_code == 409 and "zz" in res.json()["error"]["message"]
        res = await client.post(f"/devui/api/run/{run['id']}/resume", json={"checkpoint_id": "zz"})
        assert res.status_code == 404 and "zz" in res.json()["error"]["message"]
        res = await client.post(
            "/devui/api/runs/review",
            content=b"{not json",
            headers={"Content-Type": "application/json"},
        )
        assert res.status_code == 400


async def test_team_resumes_from_a_checkpoint_mid_run(url: str) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=TIMEOUT) as client:
        run = (await client.post("/devui/api/runs/pair", json={"input": "write"})).json()
        first = await run_to_stop(client, run["id"])
        cps = (await client.get(f"/devui/api/run/{run['id']}/checkpoints")).json()["checkpoints"]
        middle = next(c for c in cps if c["superstep"] == 3)  # after alice's turn
        resumed = await client.post(
            f"/devui/api/run/{run['id']}/resume", json={"checkpoint_id": middle["checkpoint_id"]}
        )
        assert resumed.status_code == 201, resumed.text
        again = await run_to_stop(client, resumed.json()["id"])
        assert [e["type"] for e in again if e.get("type") == "Error"] == []
        choices = [e["choice"] for e in again if e.get("type") == "RoutingEvent"]
        assert choices and choices[-1] == "alice" and len(choices) < 3
        assert again[-1]["status"] == "idle" and again[-1]["run_id"] == first[-1]["run_id"]


async def test_chat_with_a_team_streams_its_speakers(url: str) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=TIMEOUT) as client:
        events = await sse(client, "POST", "/devui/api/chat/pair", json={"message": "go"})
        assert "error" not in events[-1], events[-1]
        assert events[-1]["done"] and "turn 1: go" in events[-1]["text"]


async def test_events_reconnect_from_last_event_id(url: str) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=TIMEOUT) as client:
        run = (await client.post("/devui/api/runs/review", json={"input": "n"})).json()
        whole = await run_to_stop(client, run["id"])
        path = f"/devui/api/run/{run['id']}/events"
        tail = await sse(client, "GET", path, headers={"Last-Event-ID": "3"}, params={"after": 0})
        assert tail == whole[4:]
        res = await client.get(path, headers={"Last-Event-ID": "x"})
        assert res.status_code == 400 and "'x'" in res.json()["error"]["message"]


async def test_registry_drops_the_oldest_stopped_runs() -> None:
    from cantata.serve.devui_runs import MAX_KEPT_RUNS, DevRun, RunRegistry
    from cantata.workflows import InMemoryCheckpointStore

    registry = RunRegistry()
    entry = next(iter(ServedSet(served()).values()))
    runs = [
        await registry.add(DevRun(entry, InMemoryCheckpointStore()))
        for _ in range(MAX_KEPT_RUNS + 5)
    ]
    kept = registry.all()
    assert len(kept) == MAX_KEPT_RUNS and kept[-1] is runs[-1] and kept[0] is runs[5]


async def test_the_store_keeps_a_bounded_number_of_runs() -> None:
    from cantata.serve.devui_runs import MAX_KEPT_RUNS, DevRun, RunRegistry
    from cantata.workflows import InMemoryCheckpointStore

    entry = ServedSet(served())["review"]
    async with MemoryStore() as store:
        registry = RunRegistry(store)
        runs = [
            await registry.add(DevRun(entry, InMemoryCheckpointStore(), state=store))
            for _ in range(MAX_KEPT_RUNS + 3)
        ]
        stored = await store.keys("devui:run:")
        assert len(stored) == MAX_KEPT_RUNS
        assert f"devui:run:{runs[2].id}" not in stored and f"devui:run:{runs[3].id}" in stored
        listed = await registry.summaries()
        assert [r["id"] for r in listed] == [r.id for r in runs[3:]]


async def test_past_runs_survive_a_restart_and_resume_from_their_checkpoints(
    tmp_path: Path,
) -> None:
    path = tmp_path / "serve.db"
    async with (
        SQLiteStore(path) as store,
        serving(served(), store=store) as base,
        httpx.AsyncClient(base_url=base, timeout=TIMEOUT) as client,
    ):
        run = (await client.post("/devui/api/runs/review", json={"input": "note"})).json()
        events = await run_to_stop(client, run["id"])
        assert events[-1]["status"] == "idle_with_pending_requests"
    async with (
        SQLiteStore(path) as store,
        serving(served(), store=store) as base,
        httpx.AsyncClient(base_url=base, timeout=TIMEOUT) as client,
    ):
        (listed,) = (await client.get("/devui/api/runs")).json()["runs"]
        assert listed["id"] == run["id"] and listed["restored"]
        assert listed["events"] == len(events) - 1  # the stream's closing summary is not one
        again = await run_to_stop(client, run["id"])
        assert again[:-1] == events[:-1]
        end = again[-1]
        assert end["restored"] and end["status"] == "idle_with_pending_requests"
        (request,) = end["pending"]
        refused = await client.post(
            f"/devui/api/run/{run['id']}/answers", json={"answers": {request["request_id"]: "y"}}
        )
        assert refused.status_code == 409
        assert "resume it from one of its checkpoints" in refused.json()["error"]["message"]
        cps = (await client.get(f"/devui/api/run/{run['id']}/checkpoints")).json()["checkpoints"]
        waiting = [c for c in cps if c["pending"]]
        resumed = await client.post(
            f"/devui/api/run/{run['id']}/resume",
            json={"checkpoint_id": waiting[0]["checkpoint_id"]},
        )
        assert resumed.status_code == 201, resumed.text
        new = resumed.json()["id"]
        later = await run_to_stop(client, new)
        (pending,) = later[-1]["pending"]
        answered = await client.post(
            f"/devui/api/run/{new}/answers", json={"answers": {pending["request_id"]: "yes"}}
        )
        assert answered.status_code == 200, answered.text
        done = await run_to_stop(client, new, after=len(later) - 2)
        outputs = [e["data"] for e in done if e.get("type") == "OutputEvent"]
        assert outputs == ["published facts(NOTE) + tone(NOTE) (yes)"]


def test_cantata_serve_offers_the_page() -> None:
    with cli_server("tests/serve/_servers.py:echo", "--store", "memory://") as (url, _proc):
        page = httpx.get(url + "/", timeout=TIMEOUT)
        assert page.status_code == 200 and "cantata dev UI" in page.text
        entries = httpx.get(url + "/devui/api/entries", timeout=TIMEOUT).json()["entries"]
        assert [e["name"] for e in entries] == ["echo"]


async def test_runs_still_going_are_cancelled_when_the_server_stops() -> None:
    gate, seen = asyncio.Event(), []

    @executor
    async def wait(text: str, ctx: WorkflowContext[None, str]) -> None:
        try:
            async with asyncio.timeout(60):
                await gate.wait()
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise

    slow = WorkflowBuilder(wait, name="slow").build()
    async with (
        MemoryStore() as store,
        serving({"slow": slow}, store=store) as url,
        httpx.AsyncClient(base_url=url, timeout=TIMEOUT) as client,
    ):
        run = (await client.post("/devui/api/runs/slow", json={"input": "x"})).json()
        async with client.stream("GET", f"/devui/api/run/{run['id']}/events") as res:
            async for line in res.aiter_lines():
                if "ExecutorInvokedEvent" in line:
                    break
        assert seen == []
    assert seen == ["cancelled"]
