"""Admission control on a real uvicorn, through the official clients: past the running and
queued bounds a request is answered 429 with Retry-After at once (OpenAI, A2A and MCP each
in their shape), the accepted requests all finish, a request that waits too long for a turn
is refused, and the metrics endpoint counts all of it."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
import openai
import pytest
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.helpers import new_text_message
from a2a.types.a2a_pb2 import Role, SendMessageRequest
from mcp.client import Client as MCPClient

from cantata.agents import ChatAgent
from cantata.core import ConfigurationError, Message
from cantata.models import ChatOptions, ScriptedChatClient
from cantata.serve import Limits
from cantata.stores import MemoryStore

from ._servers import cli_server, echo_agent, route_table, serving

WAIT = 15.0  # bound of every wait in these tests


class _Gate:
    """A model that holds every call until opened, counting the calls under way."""

    def __init__(self) -> None:
        self.open = asyncio.Event()
        self.entered = 0

    async def __call__(self, messages: list[Message], options: ChatOptions) -> str:
        self.entered += 1
        await self.open.wait()
        return f"done: {messages[-1].text}"


@asynccontextmanager
async def _gated(limits: Limits) -> AsyncIterator[tuple[str, _Gate]]:
    gate = _Gate()
    agent = ChatAgent(ScriptedChatClient(gate), name="gated")
    async with MemoryStore() as store, serving(agent, store=store, limits=limits) as url:
        yield url, gate


async def _metric(http: httpx.AsyncClient, url: str, name: str) -> float:
    text = (await http.get(f"{url}/metrics")).text
    match = re.search(rf"^{re.escape(name)} ([0-9.e+-]+)$", text, re.M)
    return float(match.group(1)) if match else 0.0


async def _until(http: httpx.AsyncClient, url: str, name: str, value: float) -> None:
    async with asyncio.timeout(WAIT):
        while await _metric(http, url, name) != value:  # noqa: ASYNC110 (another process's state)
            await asyncio.sleep(0.02)


async def test_overload_is_answered_429_with_retry_after_and_accepted_requests_finish() -> None:
    async with _gated(Limits(max_running=2, max_queued=2)) as (url, gate):
        client = openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="-", max_retries=0)
        http = httpx.AsyncClient(timeout=WAIT)
        async with client, http:

            async def ask(i: int) -> object:
                try:
                    return await client.chat.completions.create(
                        model="gated", messages=[{"role": "user", "content": f"q{i}"}]
                    )
                except openai.RateLimitError as exc:
                    return exc

            accepted = [asyncio.create_task(ask(i)) for i in range(4)]
            await _until(http, url, "cantata_serve_queued_requests", 2)
            assert gate.entered == 2  # two run, two wait
            loop = asyncio.get_running_loop()
            start = loop.time()
            refused = await asyncio.gather(*(ask(i) for i in range(4, 10)))
            refused_in = loop.time() - start
            assert all(isinstance(r, openai.RateLimitError) for r in refused)
            first = refused[0]
            assert isinstance(first, openai.RateLimitError)
            assert int(first.response.headers["retry-after"]) >= 1
            assert first.code == "rate_limit_exceeded" and "at capacity" in first.message
            assert refused_in < WAIT  # answered at once, while the gate is still shut
            assert not any(t.done() for t in accepted)
            gate.open.set()
            async with asyncio.timeout(WAIT):
                answers = await asyncio.gather(*accepted)
            texts = sorted(a.choices[0].message.content for a in answers)  # type: ignore[attr-defined]
            assert texts == [f"done: q{i}" for i in range(4)]
            assert (
                await _metric(
                    http, url, 'cantata_serve_rejected_requests_total{reason="queue_full"}'
                )
                == 6
            )
            assert await _metric(http, url, "cantata_serve_admitted_requests_total") == 4
            assert await _metric(http, url, "cantata_serve_running_requests") == 0


async def test_a_request_that_waits_past_the_queue_timeout_is_refused() -> None:
    limits = Limits(max_running=1, max_queued=4, queue_timeout=0.3)
    async with _gated(limits) as (url, gate), httpx.AsyncClient(timeout=WAIT) as http:
        body = {"model": "gated", "messages": [{"role": "user", "content": "first"}]}
        running = asyncio.create_task(http.post(f"{url}/v1/chat/completions", json=body))
        await _until(http, url, "cantata_serve_running_requests", 1)
        waited = await http.post(f"{url}/v1/chat/completions", json=body)
        assert waited.status_code == 429 and "retry-after" in waited.headers
        assert "waited 0.3 s" in waited.json()["error"]["message"]
        gate.open.set()
        assert (await running).status_code == 200
        name = 'cantata_serve_rejected_requests_total{reason="queue_timeout"}'
        assert await _metric(http, url, name) == 1


async def test_a2a_and_mcp_are_refused_in_their_own_shape_when_full() -> None:
    limits = Limits(max_running=1, max_queued=0)
    async with _gated(limits) as (url, gate), httpx.AsyncClient(timeout=WAIT) as http:
        body = {"model": "gated", "messages": [{"role": "user", "content": "hold"}]}
        holding = asyncio.create_task(http.post(f"{url}/v1/chat/completions", json=body))
        await _until(http, url, "cantata_serve_running_requests", 1)
        # A2A: the official client fails with the HTTP status; the body is JSON-RPC
        card = await A2ACardResolver(http, f"{url}/a2a/gated").get_agent_card()
        a2a = ClientFactory(ClientConfig(streaming=False, httpx_client=http)).create(card)
        message = new_text_message("hi", role=Role.ROLE_USER)
        with pytest.raises(Exception, match="429"):
            async with asyncio.timeout(WAIT):
                _ = [e async for e in a2a.send_message(SendMessageRequest(message=message))]
        rpc = {"jsonrpc": "2.0", "id": 7, "method": "SendMessage", "params": {}}
        raw = await http.post(f"{url}/a2a/gated", json=rpc, headers={"A2A-Version": "1.0"})
        assert raw.status_code == 429 and int(raw.headers["retry-after"]) >= 1
        assert raw.json()["id"] == 7 and raw.json()["error"]["code"] == -32000
        # reading a task or the card is not model work: never refused
        card_again = await http.get(f"{url}/a2a/gated/.well-known/agent-card.json")
        assert card_again.status_code == 200
        # MCP: listing tools goes through; calling one is refused with 429
        async with asyncio.timeout(WAIT), MCPClient(f"{url}/mcp") as mcp:
            assert [t.name for t in (await mcp.list_tools()).tools] == ["gated"]
            with pytest.raises(Exception, match="at capacity"):  # its JSON-RPC error
                await mcp.call_tool("gated", {"task": "hi"})
        gate.open.set()
        assert (await holding).status_code == 200


def test_model_work_is_what_each_route_declares() -> None:
    table = route_table(echo_agent())

    def work(method: str, path: str, body: bytes = b"") -> str:
        return table.work({"method": method, "path": path}).of(body)

    assert work("POST", "/v1/chat/completions") == "model"
    assert work("POST", "/v1/responses") == "model"
    assert work("POST", "/devui/api/chat/echo") == "model"
    assert work("GET", "/v1/chat/completions") == "none"
    assert work("GET", "/v1/responses/resp_1") == "none"
    assert work("POST", "/v1/unknown") == "none"
    assert work("POST", "/a2a/echo", b'{"method": "message/stream"}') == "model"
    assert work("POST", "/a2a/echo", b'{"method": "GetTask"}') == "none"
    assert work("POST", "/a2a/echo", b"not json") == "none"
    assert work("POST", "/a2a/other", b'{"method": "message/stream"}') == "none"  # no route
    assert work("POST", "/mcp", b'{"method": "tools/call"}') == "model"
    assert work("POST", "/mcp", b'{"method": "tools/list"}') == "none"
    # the refusal's shape is the route's protocol
    assert table.work({"method": "POST", "path": "/mcp"}).protocol == "jsonrpc"
    assert table.work({"method": "POST", "path": "/v1/responses"}).protocol == "openai"


@pytest.mark.parametrize(
    "bad",
    [{"max_running": 0}, {"max_queued": -1}, {"queue_timeout": 0.0}, {"write_timeout": -1.0}],
)
def test_bad_limits_are_refused(bad: dict[str, float]) -> None:
    with pytest.raises(ConfigurationError, match=next(iter(bad))):
        Limits(**bad)  # type: ignore[arg-type]


async def test_a_request_that_would_wait_past_the_queue_timeout_is_refused_at_once() -> None:
    from cantata.serve.admission import Admission
    from cantata.serve.errors import OverloadedError
    from cantata.serve.metrics import ServeMetrics

    admission = Admission(max_running=1, max_queued=8, queue_timeout=0.05, metrics=ServeMetrics())
    async with admission.slot():
        await asyncio.sleep(0.1)  # the recent pace: a request holds its slot 0.1 s
    async with admission.slot():
        with pytest.raises(OverloadedError, match="at capacity") as refused:
            async with admission.slot():
                pass
    assert refused.value.retry_after >= 1 and admission.queued == 0 and admission.running == 0


async def test_under_twice_the_load_every_accepted_request_finishes_and_refusals_are_at_once() -> (
    None
):
    # a model that takes 0.6 s an answer and a 1 s queue timeout: a request queued behind
    # two batches would time out in the queue; admission must refuse it at the door instead
    service, limits = 0.6, Limits(max_running=2, max_queued=4, queue_timeout=1.0)
    model = ScriptedChatClient(lambda m, o: f"done: {m[-1].text}", latency=service)
    clients = 2 * (limits.max_running + limits.max_queued)
    accepted: list[str] = []
    refused: list[tuple[float, str]] = []
    async with (
        MemoryStore() as store,
        serving(ChatAgent(model, name="paced"), store=store, limits=limits) as url,
        httpx.AsyncClient(timeout=WAIT, limits=httpx.Limits(max_connections=clients)) as http,
    ):

        async def client(c: int) -> None:
            for i in range(4):
                body = {"model": "paced", "messages": [{"role": "user", "content": f"{c}.{i}"}]}
                start = asyncio.get_running_loop().time()
                reply = await http.post(f"{url}/v1/chat/completions", json=body)
                took = asyncio.get_running_loop().time() - start
                if reply.status_code == 200:
                    assert reply.json()["choices"][0]["message"]["content"] == f"done: {c}.{i}"
                    accepted.append(f"{c}.{i}")
                else:
                    assert reply.status_code == 429, reply.text
                    refused.append((took, reply.json()["error"]["message"]))

        async with asyncio.timeout(4 * WAIT):
            await asyncio.gather(*(client(c) for c in range(clients)))
        timed_out = 'cantata_serve_rejected_requests_total{reason="queue_timeout"}'
        assert await _metric(http, url, timed_out) == 0
        assert await _metric(http, url, "cantata_serve_admitted_requests_total") == len(accepted)
    assert len(accepted) + len(refused) == clients * 4
    assert accepted and refused
    # every refusal was at the door, none after a wait in the queue (shorter than one answer)
    assert all("at capacity" in message for _, message in refused)
    assert max(took for took, _ in refused) < service


def test_the_default_bounds_fit_the_embedded_model() -> None:
    import inspect

    from cantata.models import LocalChatClient
    from cantata.serve.limits import DEFAULT_MAX_QUEUED, DEFAULT_MAX_RUNNING

    parallel = inspect.signature(LocalChatClient).parameters["parallel"].default
    assert parallel == DEFAULT_MAX_RUNNING  # what its decoder runs in one batch
    assert DEFAULT_MAX_QUEUED == DEFAULT_MAX_RUNNING  # one batch waits: one answer's time


async def test_before_any_request_finished_only_one_batch_may_wait() -> None:
    from cantata.serve.admission import Admission
    from cantata.serve.errors import OverloadedError
    from cantata.serve.metrics import ServeMetrics

    admission = Admission(max_running=2, max_queued=8, queue_timeout=5.0, metrics=ServeMetrics())
    hold = asyncio.Event()

    async def one() -> None:
        async with admission.slot():
            await hold.wait()

    tasks = [asyncio.create_task(one()) for _ in range(4)]
    async with asyncio.timeout(WAIT):
        while admission.queued < 2:  # noqa: ASYNC110
            await asyncio.sleep(0)
    assert admission.running == 2
    with pytest.raises(OverloadedError, match="at capacity"):
        admission.check()  # a third waiter would need two answers' time, unknown yet
    hold.set()
    async with asyncio.timeout(WAIT):
        await asyncio.gather(*tasks)
    assert admission.running == 0 and admission.queued == 0


async def test_a_v1_request_is_refused_before_its_body_is_read() -> None:
    limits = Limits(max_running=1, max_queued=0)
    async with _gated(limits) as (url, gate), httpx.AsyncClient(timeout=WAIT) as http:
        body = {"model": "gated", "messages": [{"role": "user", "content": "hold"}]}
        holding = asyncio.create_task(http.post(f"{url}/v1/chat/completions", json=body))
        await _until(http, url, "cantata_serve_running_requests", 1)
        # headers that announce a body the client never sends: the 429 comes anyway
        host, port = url.removeprefix("http://").split(":")
        reader, writer = await asyncio.open_connection(host, int(port))
        writer.write(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n"
        )
        async with asyncio.timeout(WAIT):
            status = await reader.readline()
        writer.close()
        await writer.wait_closed()
        assert status.startswith(b"HTTP/1.1 429")
        gate.open.set()
        assert (await holding).status_code == 200


async def test_cantata_serve_takes_the_bounds_from_its_flags() -> None:
    args = ("--store", "memory://", "--max-running", "1", "--max-queued", "1")
    with cli_server("tests/serve/_slow.py:agents", *args, "--queue-timeout", "0.3") as (url, _):
        async with httpx.AsyncClient(timeout=WAIT) as http:
            body = {
                "model": "slow",
                "stream": True,
                "messages": [{"role": "user", "content": "go"}],
            }
            async with http.stream("POST", f"{url}/v1/chat/completions", json=body) as holding:
                assert holding.status_code == 200
                lines = aiter(holding.aiter_lines())
                for _ in range(40):  # an event (2 lines) each 50 ms: held its slot 1 s
                    await anext(lines)
                # the queue has room (--max-queued 1), but the run ahead has already taken
                # longer than --queue-timeout allows for a wait: refused at once (with the
                # default of 60 s it would wait for the whole slow stream)
                refused = await http.post(f"{url}/v1/chat/completions", json=body)
                assert refused.status_code == 429
                assert "at capacity" in refused.json()["error"]["message"]
