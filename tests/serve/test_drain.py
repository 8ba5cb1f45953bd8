"""Graceful drain of a real `cantata serve` subprocess: on SIGTERM a stream that can finish
within the grace period finishes, and the rest end with their protocol's terminal event
(chat completions: an error chunk then ``[DONE]``; Responses: ``response.failed``; A2A: a
failed task; the dev UI's chat: an error event), new work is refused, and the server's log
has no traceback."""

from __future__ import annotations

import asyncio
import json
import signal

import httpx
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.helpers import new_text_message
from a2a.types.a2a_pb2 import Role, SendMessageRequest, TaskState

from ._servers import STOP_TIMEOUT, cli_server

WAIT = 30.0


async def _sse(
    http: httpx.AsyncClient, url: str, body: dict[str, object], started: asyncio.Event
) -> list[str]:
    """The data lines of a streamed answer, to its end; `started` is set at the first text."""
    lines: list[str] = []
    async with http.stream("POST", url, json=body) as reply:
        assert reply.status_code == 200
        async for line in reply.aiter_lines():
            if line.startswith("data: "):
                lines.append(line[6:])
                if "word" in line:
                    started.set()
    return lines


async def _a2a(http: httpx.AsyncClient, url: str, started: asyncio.Event) -> list[int]:
    card = await A2ACardResolver(http, f"{url}/a2a/slow").get_agent_card()
    client = ClientFactory(ClientConfig(streaming=True, httpx_client=http)).create(card)
    message = new_text_message("go", role=Role.ROLE_USER)
    states: list[int] = []
    async for event in client.send_message(SendMessageRequest(message=message)):
        if event.HasField("artifact_update"):
            started.set()
        elif event.HasField("status_update"):
            states.append(event.status_update.status.state)
        elif event.HasField("task"):
            states.append(event.task.status.state)
    return states


async def test_sigterm_mid_stream_ends_every_stream_with_a_terminal_event() -> None:
    with cli_server("tests/serve/_slow.py:agents", "--store", "memory://", "--grace", "3") as (
        url,
        proc,
    ):
        async with httpx.AsyncClient(timeout=WAIT) as http:
            chat_body = {
                "model": "slow",
                "stream": True,
                "messages": [{"role": "user", "content": "go"}],
            }
            responses_body = {"model": "slow", "stream": True, "input": "go"}
            flags = [asyncio.Event() for _ in range(4)]
            tasks = [
                asyncio.create_task(_sse(http, f"{url}/v1/chat/completions", chat_body, flags[0])),
                asyncio.create_task(_sse(http, f"{url}/v1/responses", responses_body, flags[1])),
                asyncio.create_task(_a2a(http, url, flags[2])),
                asyncio.create_task(
                    _sse(http, f"{url}/devui/api/chat/slow", {"message": "go"}, flags[3])
                ),
            ]
            async with asyncio.timeout(WAIT):
                for flag in flags:
                    await flag.wait()
            proc.send_signal(signal.SIGTERM)
            await asyncio.sleep(0.3)  # the server has begun to drain (uvicorn polls each 0.1 s)
            async with asyncio.timeout(WAIT):
                chat, responses, a2a, devui = await asyncio.gather(*tasks)
        assert proc.wait(STOP_TIMEOUT) in (0, -signal.SIGTERM)  # uvicorn re-raises the signal
        log = proc.stdout.read().decode(errors="replace") if proc.stdout else ""
    # chat completions: an error chunk, then [DONE]
    assert chat[-1] == "[DONE]"
    error = json.loads(chat[-2])["error"]
    assert error["code"] == "server_shutting_down" and "shut down" in error["message"]
    # Responses: response.failed, with the error
    last = json.loads(responses[-1])
    assert last["type"] == "response.failed"
    assert last["response"]["status"] == "failed"
    assert last["response"]["error"]["code"] == "server_shutting_down"
    # A2A: the task failed
    assert a2a[-1] == TaskState.TASK_STATE_FAILED
    # the dev UI's chat: an error event, which the page shows
    assert "shut down" in json.loads(devui[-1])["error"]
    assert "Traceback" not in log and "ASGI callable" not in log, log
    assert "stopped a run at shutdown" in log


async def test_a_stream_that_finishes_within_the_grace_period_completes() -> None:
    with cli_server("tests/serve/_slow.py:agents", "--store", "memory://", "--grace", "5") as (
        url,
        proc,
    ):
        async with httpx.AsyncClient(timeout=WAIT) as http:
            body = {
                "model": "quick",
                "stream": True,
                "messages": [{"role": "user", "content": "go"}],
            }
            started = asyncio.Event()
            stream = asyncio.create_task(_sse(http, f"{url}/v1/chat/completions", body, started))
            async with asyncio.timeout(WAIT):
                await started.wait()
            proc.send_signal(signal.SIGTERM)
            async with asyncio.timeout(WAIT):
                lines = await stream
            # the server no longer takes work: the connection is refused, or a 503
            try:
                late = await http.post(f"{url}/v1/chat/completions", json={**body, "stream": False})
                assert late.status_code == 503 and "retry-after" in late.headers
            except httpx.TransportError:
                pass
    assert proc.wait(STOP_TIMEOUT) in (0, -signal.SIGTERM)  # uvicorn re-raises the signal
    assert lines[-1] == "[DONE]"
    text = "".join(
        json.loads(line)["choices"][0]["delta"].get("content", "")
        for line in lines[:-1]
        if json.loads(line).get("choices")
    )
    assert text == "word " * 10
