"""A served team keeps its state between turns in the conversation the server keeps, on
every protocol, as `team.run()` does in process: after a handoff to billing, the follow-up
goes to billing over A2A (the a2a-sdk client, on the waiting task and as a new task on the
context), over Responses with ``previous_response_id``, and over chat completions with the
history the client sends back; the A2A task of a team that asks the user stays
``input-required``. A round robin answers every turn (its termination counts the turn, not
the history) with its agents' usage summed, and takes ``temperature`` and ``instructions``
for its participants. Against a real `cantata serve`."""

from __future__ import annotations

import os
from collections.abc import Iterator

import httpx
import pytest
from a2a.client import A2ACardResolver, Client, ClientConfig, ClientFactory
from a2a.helpers import get_message_text, new_text_message
from a2a.types.a2a_pb2 import Message, Role, SendMessageRequest, Task, TaskState
from openai import AsyncOpenAI

from cantata.agents import A2AAgent
from cantata.serve import load_target
from cantata.teams import Team

from ._servers import cli_server

DESK = "tests/teams/_desk.py"


def _reference(factory: str, tasks: list[str]) -> list[str]:
    """What the team's answers read like in one process, one `team.run()` a task."""
    import asyncio

    async def go() -> list[str]:
        team: Team = load_target(f"{DESK}:{factory}")()
        out = []
        for task in tasks:
            result = await team.run(task)
            texts = [m.text for m in result.messages if m.role == "assistant" and m.text]
            out.append("\n\n".join(texts))
        return out

    return asyncio.run(go())


@pytest.fixture(scope="module")
def expected() -> dict[str, list[str]]:
    return {
        "desk": _reference("make_desk", ["Is INV-7 paid?", "And INV-8?"]),
        "trio": _reference("make_trio", ["one", "two"]),
    }


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    store = f"sqlite:///{tmp_path_factory.mktemp('served_team') / 'serve.db'}"
    with cli_server(f"{DESK}:served", "--store", store) as (base, _):
        yield base


def _openai(url: str) -> AsyncOpenAI:
    return AsyncOpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=60)


def test_in_process_the_follow_up_goes_to_billing(expected: dict[str, list[str]]) -> None:
    assert expected["desk"][1] == "billing: about 'And INV-8?'"
    assert expected["trio"] == ["a saw 1: one\n\nb saw 1: one", "c saw 2: two\n\na saw 2: two"]


async def test_responses_with_previous_response_id_goes_on_with_billing(
    url: str, expected: dict[str, list[str]]
) -> None:
    async with _openai(url) as client:
        first = await client.responses.create(model="desk", input="Is INV-7 paid?")
        second = await client.responses.create(
            model="desk", input="And INV-8?", previous_response_id=first.id
        )
    assert [first.output_text, second.output_text] == expected["desk"]


async def test_chat_completions_with_the_history_sent_back_goes_on_with_billing(
    url: str, expected: dict[str, list[str]]
) -> None:
    async with _openai(url) as client:
        messages: list[dict[str, str]] = [
            {"role": "system", "content": "You are a helpful desk."},
            {"role": "user", "content": "Is INV-7 paid?"},
        ]
        first = await client.chat.completions.create(model="desk", messages=messages)  # type: ignore[arg-type]
        messages += [
            {"role": "assistant", "content": first.choices[0].message.content or ""},
            {"role": "user", "content": "And INV-8?"},
        ]
        second = await client.chat.completions.create(model="desk", messages=messages)  # type: ignore[arg-type]
        stream = await client.chat.completions.create(
            model="desk",
            messages=messages,  # type: ignore[arg-type]
            stream=True,
        )
        streamed = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
    said = [first.choices[0].message.content, second.choices[0].message.content]
    assert said == expected["desk"]
    assert streamed == expected["desk"][1]  # streamed, the same


async def _a2a(http: httpx.AsyncClient, url: str) -> Client:
    card = await A2ACardResolver(http, url).get_agent_card()
    return ClientFactory(ClientConfig(streaming=False, httpx_client=http)).create(card)


def _text(text: str, *, task: Task | None = None, context_id: str = "") -> SendMessageRequest:
    message = new_text_message(text, role=Role.ROLE_USER)
    if task is not None:
        message = Message(
            role=Role.ROLE_USER,
            message_id=f"m-{os.urandom(6).hex()}",
            context_id=task.context_id,
            task_id=task.id,
            parts=message.parts,
        )
    elif context_id:
        message.context_id = context_id
    return SendMessageRequest(message=message)


async def _task(client: Client, request: SendMessageRequest) -> Task:
    task: Task | None = None
    async for event in client.send_message(request):
        if event.HasField("task"):
            task = event.task
        elif event.HasField("status_update"):
            update = event.status_update
            task = task or Task(id=update.task_id, context_id=update.context_id)
            task.status.CopyFrom(update.status)
    assert task is not None
    return task


async def test_a2a_sdk_client_answers_the_waiting_task_and_billing_answers(
    url: str, expected: dict[str, list[str]]
) -> None:
    async with httpx.AsyncClient(timeout=60) as http:
        client = await _a2a(http, f"{url}/a2a/desk")
        first = await _task(client, _text("Is INV-7 paid?"))
        assert first.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        assert "billing: about 'Is INV-7 paid?'" in get_message_text(first.status.message)
        second = await _task(client, _text("And INV-8?", task=first))
        assert second.id == first.id
        assert second.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        assert get_message_text(second.status.message) == expected["desk"][1]
        # a new task on the same context goes on with billing too
        third = await _task(client, _text("And INV-8?", context_id=first.context_id))
        assert third.id != first.id
        assert get_message_text(third.status.message) == expected["desk"][1]


async def test_cantatas_a2a_agent_follows_up_with_billing(
    url: str, expected: dict[str, list[str]]
) -> None:
    async with A2AAgent(f"{url}/a2a/desk", name="desk") as remote:
        thread = remote.create_thread()
        first = await remote.run("Is INV-7 paid?", thread=thread)
        assert "billing: about 'Is INV-7 paid?'" in first.text
        assert first.finish_reason == "stop" and thread.waiting_task_id == first.response_id
        second = await remote.run("And INV-8?", thread=thread)
        assert second.text == expected["desk"][1]
        assert second.response_id == first.response_id  # the same task, asking again


async def test_a_round_robin_answers_both_turns_with_usage_summed(
    url: str, expected: dict[str, list[str]]
) -> None:
    turns = ["one", "two"]
    async with _openai(url) as client:
        messages: list[dict[str, str]] = []
        said = []
        for turn in turns:
            messages.append({"role": "user", "content": turn})
            answer = await client.chat.completions.create(
                model="trio",
                messages=messages,  # type: ignore[arg-type]
                temperature=0.2,  # passed to every participant
            )
            text = answer.choices[0].message.content or ""
            said.append(text)
            messages.append({"role": "assistant", "content": text})
            assert answer.usage is not None
            assert (answer.usage.prompt_tokens, answer.usage.completion_tokens) == (20, 6)
        assert said == expected["trio"]
        first = await client.responses.create(model="trio", input="one", instructions="Be brief.")
        second = await client.responses.create(
            model="trio", input="two", previous_response_id=first.id, temperature=0.5
        )
        assert [first.output_text, second.output_text] == expected["trio"]
        assert second.usage is not None and second.usage.total_tokens == 26
    async with httpx.AsyncClient(timeout=60) as http:
        client_a2a = await _a2a(http, f"{url}/a2a/trio")
        one = await _task(client_a2a, _text("one"))
        assert one.status.state == TaskState.TASK_STATE_COMPLETED  # no one waits for the user
        two = await _task(client_a2a, _text("two", context_id=one.context_id))
        text = get_message_text(two.status.message)
        assert all(said in text for said in expected["trio"][1].split("\n\n")), text
