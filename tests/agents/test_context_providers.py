"""Context providers on a ChatAgent: what they add reaches the model request only, is
attributed, shows in the response; they see the outcome; their per-conversation state
travels with the thread (serialized, and beside a stored thread's log); failures follow the
provider's policy."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cantata.agents import (
    CONTEXT_SOURCE_KEY,
    AgentResponse,
    ChatAgent,
    ContextProvider,
    ContextProviderError,
    ContextRun,
    StateStoreMessageStore,
    agent_middleware,
)
from cantata.core import ConfigurationError, FunctionCallContent, Message, SerializationError
from cantata.models import ChatOptions, ScriptedChatClient
from cantata.stores import SQLiteStore
from cantata.teams import GroupChat
from cantata.tools import tool


class Profile(ContextProvider):
    """Tells the model the user's name, learned from what the user said in any run."""

    name = "profile"

    def __init__(self) -> None:
        self.seen: list[tuple[str, str | None, str | None]] = []

    async def before_run(self, run: ContextRun) -> None:
        known = run.state.get("user")
        if known:
            run.add_instructions(f"The user is called {known}.")
        run.add_messages(Message("user", "(profile loaded)"))

    async def after_run(self, run: ContextRun) -> None:
        for m in run.input:
            if m.text.startswith("I am "):
                run.state["user"] = m.text.removeprefix("I am ").strip(".")
        answer = run.response.text if run.response is not None else None
        error = type(run.error).__name__ if run.error is not None else None
        said = run.input[-1].text if run.input else ""  # a team turn brings no new input
        self.seen.append((said, answer, error))


def _echo_request(messages: list[Message], options: ChatOptions) -> str:
    """Answers with the request it got, as role:text lines."""
    return " | ".join(f"{m.role}:{m.text}" for m in messages)


async def test_additions_reach_the_request_not_the_thread() -> None:
    profile = Profile()
    client = ScriptedChatClient(_echo_request)
    agent = ChatAgent(client, name="helper", instructions="Be brief.", context_providers=[profile])
    first = await agent.run("I am Ada.")
    assert first.text == "system:Be brief. | user:(profile loaded) | user:I am Ada."
    thread = first.thread
    assert thread is not None
    assert [m.text for m in await thread.get_messages()] == ["I am Ada.", first.text]
    second = await agent.run("Who am I?", thread=thread)
    assert second.text == (
        "system:Be brief. | system:The user is called Ada. | user:(profile loaded) | "
        f"user:I am Ada. | assistant:{first.text} | user:Who am I?"
    )
    (added,) = second.context
    assert added.source == "profile"
    assert added.instructions == ["The user is called Ada."]
    assert [m.text for m in added.messages] == ["(profile loaded)"]
    assert added.messages[0].metadata[CONTEXT_SOURCE_KEY] == "profile"
    assert added.messages[0].author_name == "profile"
    assert profile.seen == [("I am Ada.", first.text, None), ("Who am I?", second.text, None)]
    # the request's own messages carry the attribution too
    request = client.calls[1].messages
    assert [m.metadata.get(CONTEXT_SOURCE_KEY) for m in request][:3] == [
        None,
        "profile",
        "profile",
    ]


async def test_state_survives_serialize_and_resume() -> None:
    agent = ChatAgent(ScriptedChatClient(_echo_request), context_providers=[Profile()])
    first = await agent.run("I am Grace.")
    assert first.thread is not None
    data = json.loads(json.dumps(await first.thread.serialize()))
    assert data["context"] == {"profile": {"user": "Grace"}}
    again = await agent.deserialize_thread(data)
    second = await agent.run("Hi", thread=again)
    assert "The user is called Grace." in second.text


async def test_state_lives_beside_a_stored_threads_log(tmp_path: Any) -> None:
    path = tmp_path / "threads.db"
    async with SQLiteStore(path) as store:
        factory = StateStoreMessageStore.factory(store)
        agent = ChatAgent(
            ScriptedChatClient(["ok"]), context_providers=[Profile()], message_store_factory=factory
        )
        thread = agent.create_thread()
        await agent.run("I am Linus.", thread=thread)
        thread_id = thread.id
    # another process: a new store object on the file, a thread opened by its id
    async with SQLiteStore(path) as store:
        factory = StateStoreMessageStore.factory(store)
        agent = ChatAgent(
            ScriptedChatClient(_echo_request),
            context_providers=[Profile()],
            message_store_factory=factory,
        )
        from cantata.agents import LocalThread

        reopened = LocalThread(factory(thread_id), id=thread_id)
        answer = await agent.run("Who?", thread=reopened)
        assert "The user is called Linus." in answer.text
        await reopened.delete()  # the state goes with the messages
        assert await store.get(f"thread:{thread_id}:context") is None


async def test_tools_a_provider_adds_are_offered_for_that_run() -> None:
    @tool
    def lookup(key: str) -> str:
        """Look a key up."""
        return f"value of {key}"

    class Tools(ContextProvider):
        name = "kb"

        async def before_run(self, run: ContextRun) -> None:
            run.add_tools([lookup])

    client = ScriptedChatClient(
        [Message("assistant", [FunctionCallContent("c1", "lookup", {"key": "x"})]), "done"]
    )
    agent = ChatAgent(client, context_providers=[Tools()])
    response = await agent.run("go")
    assert response.text == "done"
    assert response.context[0].tools == ["lookup"]
    assert [t.name for t in client.calls[0].options.tools or []] == ["lookup"]
    assert agent.tools == ()  # not added to the agent


async def test_kept_messages_are_recorded_before_the_input() -> None:
    class Greeter(ContextProvider):
        name = "greeter"

        async def before_run(self, run: ContextRun) -> None:
            if not await run.thread.get_messages():
                run.add_messages(Message("assistant", "Welcome!"), keep=True)

    agent = ChatAgent(ScriptedChatClient(["a", "b"]), context_providers=[Greeter()])
    first = await agent.run("hello")
    second = await agent.run("again", thread=first.thread)
    assert second.thread is not None
    texts = [m.text for m in await second.thread.get_messages()]
    assert texts == ["Welcome!", "hello", "a", "again", "b"]


class Broken(ContextProvider):
    name = "broken"

    async def before_run(self, run: ContextRun) -> None:
        raise RuntimeError("index offline")


class Skipped(Broken):
    name = "optional"
    on_error = "skip"


async def test_a_failing_provider_fails_the_run_or_is_skipped_by_its_policy() -> None:
    client = ScriptedChatClient(["never"])
    agent = ChatAgent(client, context_providers=[Broken()])
    with pytest.raises(ContextProviderError, match=r"'broken' failed before the run.*offline") as e:
        await agent.run("hi")
    assert e.value.source == "broken"
    assert client.calls == []  # the model was never asked
    skipping = ChatAgent(ScriptedChatClient(["fine"]), context_providers=[Skipped(), Profile()])
    response = await skipping.run("hi")
    assert response.text == "fine"
    assert response.context[0].skipped == "RuntimeError: index offline"
    assert response.context[1].skipped is None


async def test_after_run_sees_the_error() -> None:
    def fail(messages: list[Message], options: ChatOptions) -> str:
        raise ValueError("model broke")

    profile = Profile()
    agent = ChatAgent(ScriptedChatClient(fail), context_providers=[profile])
    with pytest.raises(ValueError, match="model broke"):
        await agent.run("hi")
    assert profile.seen == [("hi", None, "ValueError")]


async def test_streaming_runs_the_same_pipeline() -> None:
    profile = Profile()
    agent = ChatAgent(ScriptedChatClient(_echo_request), context_providers=[profile])
    stream = agent.run_stream("I am Alan.")
    chunks = [u.text async for u in stream]
    assert "".join(chunks) == "user:(profile loaded) | user:I am Alan."
    assert stream.response.context[0].source == "profile"
    assert profile.seen[0][0] == "I am Alan."
    assert stream.response.thread is not None
    assert stream.response.thread.context_state == {"profile": {"user": "Alan"}}


async def test_providers_run_inside_agent_middleware() -> None:
    order: list[str] = []

    @agent_middleware
    async def outer(context: Any, call_next: Any) -> None:
        order.append("middleware")
        await call_next()

    class Mark(ContextProvider):
        name = "mark"

        async def before_run(self, run: ContextRun) -> None:
            order.append("provider")

    agent = ChatAgent(ScriptedChatClient(["x"]), middleware=[outer], context_providers=[Mark()])
    await agent.run("go")
    assert order == ["middleware", "provider"]


async def test_team_participants_have_their_providers() -> None:
    writer = ChatAgent(
        ScriptedChatClient(_echo_request), name="writer", context_providers=[Profile()]
    )
    critic = ChatAgent(ScriptedChatClient(["ok"]), name="critic")
    team = GroupChat([writer, critic], max_turns=2)
    result = await team.run("draft")
    texts = [m.text for m in result.messages]
    assert any("user:(profile loaded)" in t for t in texts)
    await team.close()


def test_providers_are_checked() -> None:
    client = ScriptedChatClient([])
    with pytest.raises(ConfigurationError, match="not a ContextProvider"):
        ChatAgent(client, context_providers=[object()])  # type: ignore[list-item]
    with pytest.raises(ConfigurationError, match="needs a name"):
        ChatAgent(client, context_providers=[ContextProvider()])
    with pytest.raises(ConfigurationError, match="two context providers are named"):
        ChatAgent(client, context_providers=[Profile(), Profile()])


async def test_state_that_is_not_json_names_its_provider() -> None:
    class Bad(ContextProvider):
        name = "bad"

        async def after_run(self, run: ContextRun) -> None:
            run.state["when"] = object()

    agent = ChatAgent(ScriptedChatClient(["x"]), context_providers=[Bad()])
    with pytest.raises(SerializationError, match="'bad' keeps state that is not JSON"):
        await agent.run("go")


@settings(max_examples=40, deadline=None)
@given(st.dictionaries(st.text(min_size=1, max_size=8), st.dictionaries(st.text(), st.integers())))
def test_serialized_context_round_trips_or_is_refused(context: dict[str, Any]) -> None:
    import asyncio

    async def check() -> None:
        agent = ChatAgent(ScriptedChatClient([]))
        thread = agent.create_thread()
        thread.context_state.update(context)
        data = await thread.serialize()
        back = await agent.deserialize_thread(json.loads(json.dumps(data)))
        assert back.context_state == context
        bad = {**data, "context": {"p": [1, 2]}}
        with pytest.raises(SerializationError, match="one object per context provider"):
            await agent.deserialize_thread(bad)

    asyncio.run(check())


async def test_responses_with_context_round_trip_through_the_registry() -> None:
    from cantata.core import from_json, to_json

    agent = ChatAgent(ScriptedChatClient(["x"]), context_providers=[Profile()])
    response = await agent.run("go")
    back = from_json(to_json(response))
    assert isinstance(back, AgentResponse)
    assert back.context == response.context
