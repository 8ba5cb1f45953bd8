"""Identities on a real `cantata serve` (a subprocess with a keys file and a token): a
Hypothesis test interleaves, over every protocol (Responses, A2A, MCP, the dev UI's API),
what three identities (two keys and the anonymous token) create, continue and wait on, and
after each step every identity probes everything the others made: it never reads,
continues, cancels, answers or lists any of it (404, or A2A's task-not-found), its own
client-chosen ids (an A2A context, a dev UI chat) count only its own turns, its memories
never hold another's facts, and its own objects stay there for it. Once on SQLite with one
worker, once on PostgreSQL with two processes sharing the store."""

from __future__ import annotations

import json
import re
import secrets
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from ..conftest import require_service
from ._servers import cli_server

SERVED = "tests/serve/_identities.py:served"
TIMEOUT = 60.0
TASK_NOT_FOUND = -32001
WHO = ("alice", "bob", "anon")
OPS = ("respond", "a2a", "chat", "run", "wait_response", "wait_task", "flow", "answer", "remember")
_TURN = re.compile(r"turn (\d+): hi")


@dataclass
class Server:
    url: str
    keys: dict[str, str]
    names: dict[str, str]
    """Each actor's identity name on this server (fresh per server: the PostgreSQL store is
    shared with other tests)."""

    def client(self, who: str) -> httpx.Client:
        return httpx.Client(
            base_url=self.url,
            timeout=TIMEOUT,
            headers={"Authorization": f"Bearer {self.keys[who]}", "A2A-Version": "1.0"},
        )


@pytest.fixture(scope="module", params=["sqlite-1", "postgresql-2"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    kind = request.param
    tmp = tmp_path_factory.mktemp(kind)
    run = secrets.token_hex(4)
    names = {"alice": f"alice-{run}", "bob": f"bob-{run}", "anon": "anonymous"}
    keys = {who: secrets.token_urlsafe(24) for who in WHO}
    lines = [f"{names[w]}:{keys[w]}" for w in ("alice", "bob")]
    keys_file = tmp / "keys"
    keys_file.write_text("# the test's clients\n" + "\n".join(lines) + "\n", encoding="utf-8")
    if kind == "sqlite-1":
        store, memory, workers = f"sqlite:///{tmp / 's.db'}", f"sqlite:///{tmp / 'm.db'}", "1"
    else:
        require_service("PostgreSQL", "127.0.0.1", 5432)
        import os

        dsn = os.environ.get("CANTATA_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
        store, memory, workers = dsn, dsn, "2"
    env = {"CANTATA_SERVE_TOKEN": keys["anon"], "IDENT_MEMORY_URL": memory, "IDENT_RUN": run}
    args = ["--keys-file", str(keys_file), "--store", store, "--workers", workers]
    with cli_server(SERVED, *args, env=env) as (url, _proc):
        yield Server(url, keys, names)


@dataclass
class World:
    """What each actor made, and what it should see of it."""

    responses: dict[str, list[tuple[str, int]]] = field(default_factory=lambda: defaultdict(list))
    waiting_responses: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    contexts: dict[tuple[str, str], int] = field(default_factory=lambda: defaultdict(int))
    tasks: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    chats: dict[tuple[str, str], int] = field(default_factory=lambda: defaultdict(int))
    runs: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    facts: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    flows: dict[str, list[tuple[str, str]]] = field(default_factory=lambda: defaultdict(list))
    """Waiting workflow answers (response id, call id) not answered yet."""


def _turns(text: str) -> set[int]:
    return {int(n) for n in _TURN.findall(text)}


def _rpc(http: httpx.Client, path: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": secrets.token_hex(4), "method": method, "params": params}
    res = http.post(path, json=body)
    assert res.status_code == 200, res.text
    answer: dict[str, Any] = res.json()
    return answer


def _message(text: str, **extra: str) -> dict[str, Any]:
    return {
        "message": {
            "role": "ROLE_USER",
            "messageId": secrets.token_hex(8),
            "parts": [{"text": text}],
            **extra,
        }
    }


def _sse_data(res: httpx.Response) -> list[dict[str, Any]]:
    return [json.loads(line[6:]) for line in res.text.splitlines() if line.startswith("data: ")]


def _mcp(http: httpx.Client, task: str) -> str:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "keeper", "arguments": {"task": task}},
    }
    res = http.post("/mcp", json=body, headers={"Accept": "application/json, text/event-stream"})
    assert res.status_code == 200, res.text
    result = res.json()["result"]
    assert not result.get("isError"), result
    return str(result["content"][0]["text"])


def _act(server: Server, world: World, who: str, op: str, slot: str) -> None:
    with server.client(who) as http:
        if op == "respond":
            own = world.responses[who]
            previous = own[-1] if own and slot == "a" else None
            body: dict[str, Any] = {"model": "echo", "input": "hi"}
            if previous is not None:
                body["previous_response_id"] = previous[0]
            res = http.post("/v1/responses", json=body)
            assert res.status_code == 200, res.text
            turn = (previous[1] if previous else 0) + 1
            assert _turns(res.text) == {turn}, res.text
            own.append((res.json()["id"], turn))
        elif op == "a2a":  # the same client-chosen context id for every identity
            context = f"ctx-{slot}"
            answer = _rpc(http, "/a2a/echo", "SendMessage", _message("hi", contextId=context))
            world.contexts[(who, context)] += 1
            assert _turns(json.dumps(answer)) == {world.contexts[(who, context)]}, answer
            world.tasks[who].append(answer["result"]["task"]["id"])
        elif op == "chat":
            chat = f"chat-{slot}"
            res = http.post("/devui/api/chat/echo", json={"message": "hi", "chat_id": chat})
            assert res.status_code == 200, res.text
            world.chats[(who, chat)] += 1
            done = [d for d in _sse_data(res) if d.get("done")]
            assert done and _turns(done[0]["text"]) == {world.chats[(who, chat)]}, res.text
        elif op == "run":
            res = http.post("/devui/api/runs/payout", json={"input": "order 7"})
            assert res.status_code == 201, res.text
            world.runs[who].append(res.json()["id"])
        elif op == "wait_response":
            res = http.post("/v1/responses", json={"model": "support", "input": "refund please"})
            assert res.status_code == 200, res.text
            assert any(i["type"] == "mcp_approval_request" for i in res.json()["output"])
            world.waiting_responses[who].append(res.json()["id"])
        elif op == "wait_task":
            answer = _rpc(http, "/a2a/support", "SendMessage", _message("refund please"))
            task = answer["result"]["task"]
            assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", answer
            world.tasks[who].append(task["id"])
        elif op == "flow":  # a workflow waits, checkpointed in the identity's namespace
            res = http.post("/v1/responses", json={"model": "payout", "input": "order 9"})
            assert res.status_code == 200, res.text
            (call,) = [o for o in res.json()["output"] if o["type"] == "function_call"]
            world.flows[who].append((res.json()["id"], call["call_id"]))
            world.waiting_responses[who].append(res.json()["id"])
        elif op == "answer":  # its owner answers it, on whichever process takes the request
            if not world.flows[who]:
                return
            rid, call_id = world.flows[who].pop(0)
            output = {"type": "function_call_output", "call_id": call_id, "output": "yes"}
            body = {"model": "payout", "previous_response_id": rid, "input": [output]}
            res = http.post("/v1/responses", json=body)
            assert res.status_code == 200 and "paid out" in res.text, res.text
        else:
            fact = f"secret {who} {secrets.token_hex(3)}"
            assert "remembered" in _mcp(http, f"remember: {fact}")
            world.facts[who].append(fact)


def _probe(server: Server, world: World, who: str) -> None:
    """`who` finds nothing of the others, and its own things where it left them."""
    others = [o for o in WHO if o != who]
    with server.client(who) as http:
        for other in others:
            for rid in [r for r, _ in world.responses[other]] + world.waiting_responses[other]:
                assert http.get(f"/v1/responses/{rid}").status_code == 404
                go_on = {"model": "echo", "input": "hi", "previous_response_id": rid}
                assert http.post("/v1/responses", json=go_on).status_code == 404
                assert http.delete(f"/v1/responses/{rid}").status_code == 404
            for rid in world.waiting_responses[other]:
                approve = {
                    "model": "support",
                    "previous_response_id": rid,
                    "input": [
                        {
                            "type": "mcp_approval_response",
                            "approval_request_id": "x",
                            "approve": True,
                        }
                    ],
                }
                assert http.post("/v1/responses", json=approve).status_code == 404
            for tid in world.tasks[other]:
                for method in ("GetTask", "CancelTask"):
                    err = _rpc(http, "/a2a/echo", method, {"id": tid}).get("error")
                    assert err is not None and err["code"] == TASK_NOT_FOUND, (method, err)
                answer = _rpc(http, "/a2a/support", "SendMessage", _message("yes", taskId=tid))
                assert answer.get("error", {}).get("code") == TASK_NOT_FOUND, answer
            for run_id in world.runs[other]:
                assert http.get(f"/devui/api/run/{run_id}").status_code == 404
                answers = {"answers": {"any": "yes"}}
                assert (
                    http.post(f"/devui/api/run/{run_id}/answers", json=answers).status_code == 404
                )
        theirs_tasks = {t for o in others for t in world.tasks[o]}
        listed = _rpc(http, "/a2a/echo", "ListTasks", {})["result"].get("tasks", [])
        listed_ids = {t["id"] for t in listed}
        assert listed_ids.isdisjoint(theirs_tasks) and set(world.tasks[who][-1:]) <= listed_ids
        theirs_runs = {r for o in others for r in world.runs[o]}
        runs = {r["id"] for r in http.get("/devui/api/runs").json()["runs"]}
        assert runs.isdisjoint(theirs_runs) and set(world.runs[who]) <= runs
        for rid, _ in world.responses[who][-1:]:
            assert http.get(f"/v1/responses/{rid}").status_code == 200
        for tid in world.tasks[who][-1:]:
            assert "result" in _rpc(http, "/a2a/echo", "GetTask", {"id": tid})
        if any(world.facts.values()):
            recalled = _mcp(http, "recall")
            for other in others:
                assert not any(f in recalled for f in world.facts[other]), recalled
            assert all(f in recalled for f in world.facts[who]), recalled


steps = st.lists(
    st.tuples(st.sampled_from(WHO), st.sampled_from(OPS), st.sampled_from("ab")),
    min_size=1,
    max_size=6,
)


EVERY_OP = [(who, op, "a") for op in OPS for who in ("alice", "bob")]
"""One plan where two identities do everything, on the same client-chosen ids."""


@settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck))
@given(plan=steps)
@example(plan=EVERY_OP)
def test_no_identity_reaches_what_another_made(
    server: Server, plan: list[tuple[str, str, str]]
) -> None:
    world = World()
    # each example is a new world: fresh names for the client-chosen ids
    fresh = secrets.token_hex(3)
    for who, op, slot in plan:
        _act(server, world, who, op, f"{slot}{fresh}")
        _probe(server, world, who if op == "respond" else WHO[(WHO.index(who) + 1) % 3])
    for who in WHO:
        _probe(server, world, who)
