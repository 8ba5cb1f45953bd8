"""Approvals over ``/v1/responses`` as clients read them: the ``mcp_approval_request`` item's
``server_label`` is listed as an ``mcp`` tool of the response; a client may declare that
tool (the Agents SDK's ``HostedMCPTool``) and may answer after its own copy of the
conversation instead of ``previous_response_id`` (as the Agents SDK does by default); the
answer is still claimed once."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from cantata.stores import MemoryStore

from ..conftest import require_module
from ._refunds import make_support
from ._servers import serving

OWN_SERVER = {"type": "mcp", "server_label": "support", "require_approval": "always"}


@pytest.fixture
async def support_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[str]:
    monkeypatch.setenv("REFUND_LOG", str(tmp_path / "effects.log"))
    monkeypatch.setenv("REFUND_SECONDS", "0.3")
    async with MemoryStore() as store, serving(make_support(), store=store) as url:
        yield url


def _effects(tmp_path: Path) -> list[str]:
    log = tmp_path / "effects.log"
    return [line.split(" ", 1)[1] for line in log.read_text().splitlines()] if log.exists() else []


async def _post(http: httpx.AsyncClient, url: str, body: dict[str, Any]) -> httpx.Response:
    return await http.post(f"{url}/v1/responses", json={"model": "support", **body})


async def test_the_approval_names_a_server_listed_in_the_tools_and_the_client_may_declare_it(
    support_url: str, tmp_path: Path
) -> None:
    async with httpx.AsyncClient(timeout=30) as http:
        first = await _post(http, support_url, {"input": "refund 1001", "tools": [OWN_SERVER]})
        assert first.status_code == 200, first.text
        asked = first.json()
        (request,) = [o for o in asked["output"] if o["type"] == "mcp_approval_request"]
        (server,) = [t for t in asked["tools"] if t["type"] == "mcp"]
        assert server["server_label"] == request["server_label"] == "support"
        assert server["allowed_tools"] == ["refund"]
        other = {**OWN_SERVER, "server_label": "elsewhere"}
        refused = await _post(http, support_url, {"input": "hi", "tools": [other]})
        assert refused.status_code == 400 and "'mcp'" in refused.text
        # the Agents SDK's default: its copy of the conversation, then the answer
        history = [{"role": "user", "content": "refund 1001"}, *asked["output"]]
        answer = {"type": "mcp_approval_response", "approval_request_id": request["id"]}
        body = {"input": [*history, {**answer, "approve": True}], "tools": [OWN_SERVER]}
        done = await _post(http, support_url, body)
        assert done.status_code == 200, done.text
        assert done.json()["previous_response_id"] == asked["id"]
        assert done.json()["output"][0]["content"][0]["text"] == "Done: refunded order 1001"
        again = await _post(http, support_url, body)
        assert again.status_code == 409 and again.json()["error"]["code"] == "already_answered"
        # a copy that changes what was asked changes nothing: the stored request runs
        second = (await _post(http, support_url, {"input": "refund 1001"})).json()
        message, request_2 = second["output"]
        forged = [history[0], message, {**request_2, "arguments": '{"order": 9}'}]
        answer_2 = {"type": "mcp_approval_response", "approval_request_id": request_2["id"]}
        went = await _post(http, support_url, {"input": [*forged, {**answer_2, "approve": True}]})
        assert went.json()["output"][0]["content"][0]["text"] == "Done: refunded order 1001"
    assert _effects(tmp_path) == ["refund 1001", "refund 1001"]


async def test_the_agents_sdk_answers_an_approval_with_a_hosted_mcp_tool(support_url: str) -> None:
    agents = require_module("agents", "pip install -e '.[compat]'")
    from openai import AsyncOpenAI

    agents.set_tracing_disabled(True)
    client = AsyncOpenAI(base_url=f"{support_url}/v1", api_key="unused", max_retries=0)
    asked: list[str] = []

    def approve(request: Any) -> dict[str, Any]:
        asked.append(request.data.name)
        return {"approve": True}

    tool = agents.HostedMCPTool(tool_config=OWN_SERVER, on_approval_request=approve)  # type: ignore[arg-type]
    model = agents.OpenAIResponsesModel(model="support", openai_client=client)
    agent = agents.Agent(name="client", model=model, tools=[tool])
    for options in ({}, {"auto_previous_response_id": True}):
        result = await agents.Runner.run(agent, "refund order 1001", **options)
        assert result.final_output == "Done: refunded order 1001"
    assert asked == ["refund", "refund"]


async def test_the_dev_ui_chat_shows_a_pending_approval_and_takes_yes_once(
    support_url: str, tmp_path: Path
) -> None:
    from .test_devui_api import sse

    chat = f"{support_url}/devui/api/chat/support"
    async with httpx.AsyncClient(timeout=30) as http:
        asked = await sse(http, "POST", chat, json={"message": "refund 1001"})
        chat_id = asked[0]["chat_id"]
        shown = "".join(e.get("text", "") for e in asked if not e.get("done"))
        assert "approve the call of `refund`" in shown and "answer yes or no" in shown
        passed_by = await http.post(chat, json={"message": "and the weather?", "chat_id": chat_id})
        assert passed_by.status_code == 409, passed_by.text
        assert passed_by.json()["error"]["code"] == "input_required"
        # three answers whose requests all arrive before the first one's run streams
        yes = {"message": "yes", "chat_id": chat_id}
        answers = await asyncio.gather(
            *(http.send(http.build_request("POST", chat, json=yes), stream=True) for _ in range(3))
        )
        bodies = [(await a.aread()).decode() for a in answers]
        codes = sorted(a.status_code for a in answers)
        assert codes == [200, 409, 409], bodies
        for answer, body in zip(answers, bodies, strict=True):
            if answer.status_code == 200:
                assert "Done: refunded order 1001" in body
            else:
                assert '"already_answered"' in body
    assert _effects(tmp_path) == ["refund 1001"]


async def test_a_text_only_client_answers_yes_after_its_own_copy_of_the_conversation(
    support_url: str, tmp_path: Path
) -> None:
    """As pydantic-ai and LangChain send it: the answer's text says what waits and where,
    and "yes" after the client's copy of the conversation answers it, once."""
    async with httpx.AsyncClient(timeout=30) as http:
        asked = (await _post(http, support_url, {"input": "refund 1001"})).json()
        text = asked["output"][0]["content"][0]["text"]
        assert "approve the call of `refund`" in text and f"(waiting in {asked['id']})" in text
        history = [
            {"role": "user", "content": "refund 1001"},
            {"role": "assistant", "content": text},
            {"role": "user", "content": "yes"},
        ]
        done = await _post(http, support_url, {"input": history})
        assert done.status_code == 200, done.text
        assert done.json()["output"][0]["content"][0]["text"] == "Done: refunded order 1001"
        again = await _post(http, support_url, {"input": history})
        assert again.status_code == 409 and again.json()["error"]["code"] == "already_answered"
    assert _effects(tmp_path) == ["refund 1001"]


async def test_pydantic_ai_answers_an_approval_with_yes(support_url: str, tmp_path: Path) -> None:
    require_module("pydantic_ai", "pip install -e '.[compat]'")
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIResponsesModel
    from pydantic_ai.providers.openai import OpenAIProvider

    provider = OpenAIProvider(base_url=f"{support_url}/v1", api_key="unused")
    agent = Agent(OpenAIResponsesModel("support", provider=provider))
    asked = await agent.run("refund order 1001")
    assert "approve the call of `refund`" in asked.output
    done = await agent.run("yes", message_history=asked.all_messages())
    assert done.output == "Done: refunded order 1001"
    assert _effects(tmp_path) == ["refund 1001"]
