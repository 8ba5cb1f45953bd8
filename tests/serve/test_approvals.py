"""An approval is taken once: a real `cantata serve` given many answers to one pending
approval at the same moment (and again later) runs the approved tool once; every other
answer is a 409 with code ``already_answered`` and runs nothing. The tool's side effect is a
line in a file, counted across every server process."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from a2a.helpers import get_message_text
from openai import AsyncOpenAI

from ._servers import cli_server

SUPPORT = "tests/serve/_refunds.py:support"
SERVED = "tests/serve/_refunds.py:served"
DONE = "Done: refunded order 1001"
KINDS = {
    # served name: what to ask, the side effect once answered, what the answer says
    "support": ("refund order 1001", "refund 1001", DONE),
    "desk": ("refund order 1001", "refund 1001", DONE),
    "payout": ("order 7", "payout", "paid out"),
}


def _client(url: str) -> AsyncOpenAI:
    return AsyncOpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=60)


def _effects(log: Path) -> list[str]:
    """The side effects so far, without the process ids."""
    lines = log.read_text().splitlines() if log.exists() else []
    return [line.split(" ", 1)[1] for line in lines]


def _approval(response: Any, approve: bool = True) -> list[dict[str, Any]]:
    (item,) = [o for o in response.output if o.type == "mcp_approval_request"]
    return [{"type": "mcp_approval_response", "approval_request_id": item.id, "approve": approve}]


async def _ask(url: str, model: str, text: str) -> Any:
    async with _client(url) as client:
        return await client.responses.create(model=model, input=text)


async def _answer(url: str, model: str, previous: str, answer: Any) -> Any:
    """One answer on its own connection (so that `--workers` may give it to any worker)."""
    async with _client(url) as client:
        return await client.responses.create(
            model=model, previous_response_id=previous, input=answer
        )


async def _at_once(urls: list[str], model: str, asked: Any, count: int) -> tuple[Any, list[Any]]:
    """`count` copies of the approval of `asked`, sent together (spread over `urls`): the
    one answer that went on, and the errors of the others."""
    answer = _answer_items(asked)
    results = await asyncio.gather(
        *(_answer(urls[i % len(urls)], model, asked.id, answer) for i in range(count)),
        return_exceptions=True,
    )
    went_on = [r for r in results if not isinstance(r, BaseException)]
    refused = [r for r in results if isinstance(r, BaseException)]
    assert len(went_on) == 1, results
    return went_on[0], refused


def _answer_items(response: Any) -> list[dict[str, Any]]:
    """The answer that says yes to what `response` waits for: an approval, or the output of
    a workflow's ``request_info`` call."""
    calls = [o for o in response.output if o.type == "function_call"]
    if calls:
        (call,) = calls
        return [{"type": "function_call_output", "call_id": call.call_id, "output": "yes"}]
    return _approval(response)


def _already_answered(error: BaseException) -> None:
    assert isinstance(error, openai.ConflictError), error
    assert error.status_code == 409
    assert error.code == "already_answered", error


@pytest.mark.parametrize("workers", [1, 2])
async def test_concurrent_answers_to_a_lone_agents_approval_run_its_tool_once(
    tmp_path: Path, workers: int
) -> None:
    log = tmp_path / "effects.log"
    store = f"sqlite:///{tmp_path / 'serve.db'}"
    args = ("--store", store, "--workers", str(workers))
    with cli_server(SUPPORT, *args, env={"REFUND_LOG": str(log)}) as (url, _):
        for round_ in range(1, 3):
            asked = await _ask(url, "support", "refund order 1001")
            assert _effects(log) == ["refund 1001"] * (round_ - 1)
            done, refused = await _at_once([url], "support", asked, 4)
            assert done.output_text == DONE
            assert len(refused) == 3
            for error in refused:
                _already_answered(error)
                assert "answered by another request" in error.message
            # later, the same answer again: to the response that asked, then to the answer
            with pytest.raises(openai.ConflictError) as again:
                await _answer(url, "support", asked.id, _approval(asked))
            _already_answered(again.value)
            assert done.id in again.value.message  # where the conversation went on
            with pytest.raises(openai.ConflictError) as after:
                await _answer(url, "support", done.id, _approval(asked))
            _already_answered(after.value)
            assert _effects(log) == ["refund 1001"] * round_


async def test_yes_or_no_typed_as_text_answers_the_one_pending_approval(tmp_path: Path) -> None:
    log = tmp_path / "effects.log"
    env = {"REFUND_LOG": str(log)}
    with cli_server(SUPPORT, "--store", f"sqlite:///{tmp_path / 't.db'}", env=env) as (url, _):
        asked = await _ask(url, "support", "refund order 1001")
        (item,) = [o for o in asked.output if o.type == "mcp_approval_request"]
        # a message that would pass the approval by is refused, naming what to send
        with pytest.raises(openai.ConflictError) as passed_by:
            await _answer(url, "support", asked.id, "what is the weather?")
        assert passed_by.value.code == "input_required"
        shape = f'"type": "mcp_approval_response", "approval_request_id": "{item.id}"'
        assert shape in passed_by.value.message and '"yes" or "no"' in passed_by.value.message
        assert _effects(log) == []
        done = await _answer(url, "support", asked.id, "Yes")
        assert done.output_text == DONE and _effects(log) == ["refund 1001"]
        with pytest.raises(openai.ConflictError) as twice:
            await _answer(url, "support", asked.id, "yes")
        _already_answered(twice.value)
        denied_ask = await _ask(url, "support", "refund order 1001")
        denied = await _answer(url, "support", denied_ask.id, "no")
        assert denied.output_text.startswith("Not done:")
        assert _effects(log) == ["refund 1001"]


@contextmanager
def _deployment(kind: str, tmp_path: Path, log: Path, dsn: str | None) -> Iterator[list[str]]:
    """The base URLs of one way of serving `SERVED` over one store: one process, `--workers
    2`, or two `cantata serve` processes on one SQLite file, one PostgreSQL database or one
    Redis (`dsn`, the store's URL, for the last two)."""
    store = dsn or f"sqlite:///{tmp_path / 'serve.db'}"
    env = {"REFUND_LOG": str(log)}
    with ExitStack() as stack:
        if kind == "workers-2":
            url, _ = stack.enter_context(
                cli_server(SERVED, "--store", store, "--workers", "2", env=env)
            )
            yield [url]
            return
        count = 1 if kind == "one" else 2
        yield [
            stack.enter_context(cli_server(SERVED, "--store", store, env=env))[0]
            for _ in range(count)
        ]


async def _answered_once(urls: list[str], log: Path, before: list[str]) -> list[str]:
    """For each served kind: ask, send 4 answers at once over `urls`, check one went on and
    the others are 409 `already_answered`, and that a later answer is one too. The side
    effects after, `before` plus one per kind."""
    effects = list(before)
    for name, (ask, effect, said) in KINDS.items():
        asked = await _ask(urls[0], name, ask)
        done, refused = await _at_once(urls, name, asked, 4)
        assert said in done.output_text, (name, done.output_text)
        assert len(refused) == 3
        for error in refused:
            _already_answered(error)
        with pytest.raises(openai.ConflictError) as later:
            await _answer(urls[-1], name, asked.id, _answer_items(asked))
        _already_answered(later.value)
        effects.append(effect)
        assert _effects(log) == effects, name
    return effects


# Two processes on one SQLite file answer every kind in the kill -9 and the A2A tests below.
@pytest.mark.parametrize("kind", ["one", "workers-2", "two-postgres", "two-redis"])
async def test_an_answer_runs_once_for_an_agent_a_team_and_a_workflow(
    tmp_path: Path, kind: str, request: pytest.FixtureRequest
) -> None:
    services = {"two-postgres": "postgres_dsn", "two-redis": "redis_url"}
    dsn = request.getfixturevalue(services[kind]) if kind in services else None
    log = tmp_path / "effects.log"
    with _deployment(kind, tmp_path, log, dsn) as urls:
        effects = await _answered_once(urls, log, [])
        if kind == "workers-2":  # a second round, on workers that have each answered once
            await _answered_once(urls, log, effects)


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_after_kill_9_a_pending_answer_runs_once_and_an_answered_one_never_again(
    tmp_path: Path, backend: str, request: pytest.FixtureRequest
) -> None:
    store = (
        request.getfixturevalue("postgres_dsn")
        if backend == "postgres"
        else f"sqlite:///{tmp_path / 'serve.db'}"
    )
    log = tmp_path / "effects.log"
    env = {"REFUND_LOG": str(log)}
    with cli_server(SERVED, "--store", store, env=env) as (url, proc):
        pending = {name: await _ask(url, name, ask) for name, (ask, _, _) in KINDS.items()}
        answered = {name: await _ask(url, name, ask) for name, (ask, _, _) in KINDS.items()}
        for name, asked in answered.items():
            await _answer(url, name, asked.id, _answer_items(asked))
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
    first = [KINDS[name][1] for name in answered]
    assert _effects(log) == first
    with (
        cli_server(SERVED, "--store", store, env=env) as (one, _),
        cli_server(SERVED, "--store", store, env=env) as (two, _),
    ):
        for name, asked in answered.items():  # answered before the kill: never again
            with pytest.raises(openai.ConflictError) as again:
                await _answer(two, name, asked.id, _answer_items(asked))
            _already_answered(again.value)
        assert _effects(log) == first
        for name, asked in pending.items():  # pending at the kill: once, after it
            done, refused = await _at_once([one, two], name, asked, 4)
            assert KINDS[name][2] in done.output_text
            for error in refused:
                _already_answered(error)
        assert _effects(log) == first + [KINDS[n][1] for n in pending]


A2A_ANSWERS = {"support": True, "desk": True, "payout": "yes"}


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_a2a_answers_at_once_to_two_processes_run_once_for_every_kind(
    tmp_path: Path, backend: str, request: pytest.FixtureRequest
) -> None:
    dsn = request.getfixturevalue("postgres_dsn") if backend == "postgres" else None
    log = tmp_path / "effects.log"
    with _deployment("two-" + backend, tmp_path, log, dsn) as urls:
        async with httpx.AsyncClient(timeout=60) as http:
            await _a2a_once(http, urls, log)


async def _a2a_once(http: httpx.AsyncClient, urls: list[str], log: Path) -> None:
    """For each served kind over A2A: a task waits, 4 answers at once over `urls` (1 goes
    on, the others are errors) and one later, the side effect once."""
    from a2a.types.a2a_pb2 import Task, TaskState
    from a2a.utils.errors import A2AError

    from .test_stored_sessions import _a2a, _data, _requests, _task, _text

    effects: list[str] = []
    for name, (ask, effect, said) in KINDS.items():
        clients = [await _a2a(http, f"{url}/a2a/{name}") for url in urls]
        task = await _task(clients[0], _text(ask))
        assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        (asked,) = _requests(task)
        answer = {"answers": {asked["request_id"]: A2A_ANSWERS[name]}}
        results = await asyncio.gather(
            *(_task(clients[i % 2], _data(answer, task)) for i in range(4)),
            return_exceptions=True,
        )
        done = [r for r in results if isinstance(r, Task)]
        assert len(done) == 1, results
        assert said in get_message_text(done[0].status.message)
        assert all(isinstance(r, A2AError) for r in results if r not in done), results
        with pytest.raises(A2AError):
            await _task(clients[1], _data(answer, task))
        effects.append(effect)
        assert _effects(log) == effects, name
