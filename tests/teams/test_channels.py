"""Channels: one history shared by participants of two thread kinds (local threads, and
threads on an in-test chat server), broadcast without waiting, catching up, failures kept
and raised at the sync point, late channels, filtering, visibility, reducing."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from cantata.agents import AgentResponse, AgentThread, ChatAgent, LocalThread, ServiceThread
from cantata.core import (
    ConfigurationError,
    FunctionCallContent,
    FunctionResultContent,
    Message,
    TextContent,
    TimeoutError,
)
from cantata.models import ChatOptions, ScriptedChatClient, tool_call
from cantata.runtime import LocalRuntime
from cantata.teams import (
    ChannelSet,
    ChannelSyncError,
    GroupChat,
    LocalChannel,
    ServiceChannel,
    channel_key,
)
from cantata.teams.channels import factories_for
from cantata.teams.replication import Reduction, ReplicatedChannels

from ._agents import counting_agent
from ._server import ChatServer, ServerAgent


def _src(*messages: Message) -> list[tuple[str, Message]]:
    return [(m.author_name or m.role, m) for m in messages]


async def test_two_thread_kinds_share_one_history_with_one_channel_per_kind() -> None:
    server = ChatServer()
    local_a, local_b = counting_agent("la"), counting_agent("lb")
    remote_a, remote_b = ServerAgent(server, name="ra"), ServerAgent(server, name="rb")
    team = GroupChat([local_a, remote_a, local_b, remote_b], max_turns=4)
    session = team.create_session()
    result = await session.run("topic")
    texts = [m.text for m in result.messages]
    assert texts == [
        "topic",
        "la says 1",  # la sees the task
        "ra saw 2: la says 1",  # the server thread got the task and la's reply
        "lb says 3",  # lb sees task, la, ra
        "rb saw 4: lb says 3",  # rb shares ra's server thread: it sees ra's answer too
    ]
    # one channel per thread kind, not one per agent: one conversation on the server
    assert sorted(session.channels.keys) == sorted({channel_key(local_a), channel_key(remote_a)})
    assert len(server.conversations) == 1
    (conversation,) = server.conversations.values()
    assert [m.text for m in conversation] == texts[:5]


async def test_broadcast_returns_at_once_and_reading_waits_until_caught_up() -> None:
    server = ChatServer()
    agent = ServerAgent(server, name="ra")
    channels = ChannelSet(factories_for([agent]))
    await channels.sync(channel_key(agent), agent, list)  # make the channel (empty history)
    server.gate = asyncio.Event()
    channels.broadcast(_src(Message("user", "one"), Message("user", "two")))
    # the broadcast did not wait for the server
    assert channels.state()[channel_key(agent)]["queued"] == 1
    reader = asyncio.ensure_future(channels.sync(channel_key(agent), agent, list))
    await asyncio.sleep(0.01)
    assert not reader.done()  # reading waits for the delivery
    server.gate.set()
    channel = await reader
    assert isinstance(channel, ServiceChannel)
    assert [m.text for m in next(iter(server.conversations.values()))] == ["one", "two"]


async def test_a_failed_delivery_is_kept_raised_at_sync_then_delivered() -> None:
    server = ChatServer()
    agent = ServerAgent(server, name="ra")
    key = channel_key(agent)
    channels = ChannelSet(factories_for([agent]))
    await channels.sync(key, agent, list)
    server.fail_next = 1
    channels.broadcast(_src(Message("user", "precious")))
    await asyncio.sleep(0)  # the background delivery runs, and fails
    with pytest.raises(ChannelSyncError, match=r"failed to receive 1 message.*kept") as info:
        await channels.sync(key, agent, list)
    assert "server refused" in str(info.value.__cause__)
    # peeked, not popped: the next sync delivers it, nothing was lost
    await channels.sync(key, agent, list)
    assert [m.text for m in next(iter(server.conversations.values()))] == ["precious"]
    assert channels.state()[key] == {"queued": 0, "failed": False}


async def test_a_failure_in_a_team_surfaces_when_that_participant_reads() -> None:
    server = ChatServer()
    team = GroupChat([counting_agent("la"), ServerAgent(server, name="ra")], max_turns=2)
    session = team.create_session()
    server.fail_next = 1  # the first delivery to the server channel fails
    with pytest.raises(Exception, match="server refused"):
        await session.run("hello")


async def test_a_late_channel_first_receives_the_whole_history() -> None:
    server = ChatServer()
    agent = ServerAgent(server, name="ra")
    local = counting_agent("la")
    channels = ChannelSet(factories_for([local, agent]))
    await channels.sync(channel_key(local), local, list)
    early = _src(Message("user", "a"), Message("assistant", "b", author_name="la"))
    channels.broadcast(early)  # the server channel does not exist yet
    channel = await channels.sync(channel_key(agent), agent, lambda: early)
    assert isinstance(channel, ServiceChannel)
    assert [m.text for m in next(iter(server.conversations.values()))] == ["a", "b"]


async def test_contents_a_channel_cannot_take_are_trimmed_and_empty_messages_dropped() -> None:
    server = ChatServer()
    agent = ServerAgent(server, name="ra")
    channels = ChannelSet(factories_for([agent]))
    await channels.sync(channel_key(agent), agent, list)
    call_only = Message("assistant", [FunctionCallContent("c1", "f", {})], author_name="x")
    result_only = Message("tool", [FunctionResultContent("c1", 1)])
    mixed = Message("assistant", [TextContent("hi"), FunctionCallContent("c2", "g", {})])
    channels.broadcast(_src(call_only, result_only, mixed))
    await channels.sync(channel_key(agent), agent, list)
    (conversation,) = server.conversations.values()
    assert len(conversation) == 1
    assert conversation[0].contents == [TextContent("hi")]
    assert conversation[0].message_id == mixed.message_id


async def test_tool_traffic_is_hidden_from_the_transcript_unless_it_is_last() -> None:
    from cantata.tools import tool

    @tool
    def lookup(q: str) -> str:
        """Look something up."""
        return f"found {q}"

    client = ScriptedChatClient([[tool_call("lookup", {"q": "x"})], "the answer is found x"])
    researcher = ChatAgent(client, name="researcher", tools=[lookup])
    team = GroupChat([researcher], max_turns=1)
    result = await team.create_session().run("find x")
    assert [m.text for m in result.messages] == ["find x", "the answer is found x"]

    # a turn that ends with a tool result shows it
    from cantata.teams.manager import visible

    call = Message("assistant", [FunctionCallContent("c", "f", {})])
    res = Message("tool", [FunctionResultContent("c", 1)])
    assert visible([call, res]) == [res]


async def test_other_agents_are_shown_as_user_messages_in_a_local_view() -> None:
    channel = LocalChannel("local")
    await channel.receive(
        _src(
            Message("user", "task", author_name="user"),
            Message("assistant", "mine", author_name="me"),
            Message("assistant", "theirs", author_name="them"),
            Message("assistant", [FunctionCallContent("c", "f", {})], author_name="them"),
        )
    )
    view = channel.view("me")
    assert [(m.role, m.text, m.author_name) for m in view] == [
        ("user", "task", "user"),
        ("assistant", "mine", "me"),
        ("user", "theirs", "them"),  # their tool call is not shown to me
    ]


async def test_reducing_resets_every_channel_and_delivers_the_reduced_history() -> None:
    server = ChatServer()
    agent = ServerAgent(server, name="ra")
    local = counting_agent("la")
    channels = ChannelSet(factories_for([local, agent]))
    await channels.sync(channel_key(local), local, list)
    await channels.sync(channel_key(agent), agent, list)
    channels.broadcast(_src(*[Message("user", str(i)) for i in range(5)]))
    await channels.sync(channel_key(agent), agent, list)
    old = set(server.conversations)
    await channels.reset(_src(Message("user", "summary")))
    remote = await channels.sync(channel_key(agent), agent, list)
    local_channel = await channels.sync(channel_key(local), local, list)
    assert isinstance(remote, ServiceChannel) and isinstance(local_channel, LocalChannel)
    # the old server thread was deleted; the new one holds only the reduced history
    assert not old & set(server.conversations)
    assert [m.text for m in next(iter(server.conversations.values()))] == ["summary"]
    assert [m.text for m in local_channel.view("la")] == ["summary"]


async def test_a_team_with_a_reducer_shows_participants_the_reduced_history() -> None:
    seen: list[int] = []

    def answer(messages: Sequence[Message], options: object) -> str:
        seen.append(len(messages))
        return "ok"

    class LastTwo:
        """Keeps the last two messages (TruncatingReducer keeps the newest user message,
        the task here, so it would keep everything)."""

        async def reduce(self, messages: Sequence[Message]) -> list[Message]:
            return list(messages[-2:])

    agents = [ChatAgent(ScriptedChatClient(answer), name=n) for n in ("a", "b")]
    team = GroupChat(agents, max_turns=6, history_reducer=LastTwo())
    result = await team.create_session().run("go")
    assert len(result.messages) == 7  # the authoritative history is whole
    assert max(seen) <= 3  # each model saw at most the reduced two, plus its own reply


class OddThread(AgentThread):
    """A thread kind no channel serves."""

    @property
    def id(self) -> str | None:
        return "odd"

    async def _create(self) -> None: ...
    async def _delete(self) -> None: ...
    async def _on_new_messages(self, messages: list[Message]) -> None: ...
    async def _get_messages(self) -> list[Message]:
        return []

    async def _serialize(self) -> dict[str, object]:
        return {}


class OddAgent(ServerAgent):
    thread_type = OddThread  # type: ignore[assignment]


def test_an_agent_kind_with_no_channel_is_refused_clearly() -> None:
    with pytest.raises(ConfigurationError, match=r"participant 'odd'.*OddThread.*channels="):
        GroupChat([counting_agent("a"), OddAgent(ChatServer(), name="odd")], max_turns=1)


async def test_a_custom_channel_can_serve_a_new_thread_kind() -> None:
    team = GroupChat(
        [counting_agent("a")],
        max_turns=1,
        channels={LocalThread: lambda key, agent: LocalChannel(key)},
    )
    result = await team.create_session().run("x")
    assert result.messages[-1].text == "a says 1"


async def test_reading_a_stalled_channel_is_bounded() -> None:
    server = ChatServer()
    agent = ServerAgent(server, name="ra")
    channels = ChannelSet(factories_for([agent]), sync_timeout=0.05)
    await channels.sync(channel_key(agent), agent, list)
    server.gate = asyncio.Event()
    channels.broadcast(_src(Message("user", "x")))
    with pytest.raises(TimeoutError, match=r"did not catch up within 0\.05s"):
        await channels.sync(channel_key(agent), agent, list)
    server.gate.set()
    await channels.close()


class AnsweringThread(ServiceThread):
    """A service thread that leaves recording to the service as it answers (the base
    class's behaviour): new messages must reach it as run input."""

    kind = "answering"

    def __init__(self, server: ChatServer, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.server = server

    async def _create_on_service(self) -> str:
        return self.server.create()

    async def _delete_on_service(self, thread_id: str) -> None:
        self.server.conversations.pop(thread_id, None)


class AnsweringAgent(ServerAgent):
    """Posts its input and its answer to the server itself, as a remote agent would."""

    thread_type = AnsweringThread  # type: ignore[assignment]

    def create_thread(self) -> AnsweringThread:  # type: ignore[override]
        return AnsweringThread(self.server)

    async def run(
        self, messages: object = None, *, thread: object = None, **kwargs: object
    ) -> object:  # type: ignore[override]
        thread = self._thread_for_run(thread)  # type: ignore[arg-type]
        await thread.create()
        incoming = self._incoming(messages)  # type: ignore[arg-type]
        assert thread.id is not None
        await self.server.post(thread.id, incoming)
        history = self.server.conversations[thread.id]
        reply = Message("assistant", f"{self.name} saw {len(history)}", author_name=self.name)
        await self.server.post(thread.id, [reply])
        return AgentResponse([reply], thread=thread, agent_id=self.id)


async def test_a_thread_that_records_as_it_answers_gets_what_it_missed_as_input() -> None:
    server = ChatServer()
    team = GroupChat(
        [counting_agent("la"), AnsweringAgent(server, name="ans"), counting_agent("lb")],
        max_turns=5,
    )
    result = await team.create_session().run("topic")
    assert [m.text for m in result.messages] == [
        "topic",
        "la says 1",
        "ans saw 2",  # the task and la's reply came as its input
        "lb says 3",
        "la says 4",
        "ans saw 5",  # lb's and la's replies came next time: nothing missed, nothing twice
    ]


class ToolEnder(ServerAgent):
    """A turn that ends with a tool result (say, a tool that answers for the agent)."""

    thread_type = LocalThread  # type: ignore[assignment]

    def create_thread(self) -> LocalThread:  # type: ignore[override]
        return LocalThread()

    async def run(self, messages: object = None, **kwargs: object) -> AgentResponse:  # type: ignore[override]
        call = Message(
            "assistant", [FunctionCallContent("c1", "lookup", {})], author_name=self.name
        )
        result = Message("tool", [FunctionResultContent("c1", "42")], author_name=self.name)
        return AgentResponse([call, result], agent_id=self.id)


async def test_a_turn_ending_in_a_tool_result_shows_it_in_the_transcript() -> None:
    team = GroupChat([ToolEnder(ChatServer(), name="tools"), counting_agent("b")], max_turns=2)
    result = await team.create_session().run("q")
    shown = [(m.author_name, m.role) for m in result.messages]
    assert shown == [("user", "user"), ("tools", "tool"), ("b", "assistant")]


class OptionsSeen(ServerAgent):
    """Remembers the run options of each of its runs (on the server thread kind)."""

    def __init__(self, server: ChatServer, *, name: str) -> None:
        super().__init__(server, name=name)
        self.seen: list[ChatOptions | None] = []

    async def run(self, messages: object = None, **kwargs: object) -> AgentResponse:  # type: ignore[override]
        options = kwargs.get("options")
        self.seen.append(options if isinstance(options, ChatOptions) else None)
        return await super().run(messages, **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize("streamed", [False, True])
async def test_run_options_reach_a_local_agent_for_that_run_only(streamed: bool) -> None:
    client = ScriptedChatClient(["one", "two"])
    agent = ChatAgent(client, name="a", options=ChatOptions(temperature=0.5))
    channel = LocalChannel("local")
    await channel.receive(_src(Message("user", "q")))
    updates: list[object] = []
    on_update = updates.append if streamed else None
    first = await channel.invoke(agent, options=ChatOptions(max_tokens=7), on_update=on_update)
    second = await channel.invoke(agent, on_update=on_update)
    assert [first.text, second.text] == ["one", "two"]
    assert [c.options.max_tokens for c in client.calls] == [7, None]  # that run only
    assert [c.options.temperature for c in client.calls] == [0.5, 0.5]  # laid over its own
    assert agent.options.max_tokens is None
    assert bool(updates) is streamed


async def test_run_options_reach_an_agent_on_a_service_channel() -> None:
    server = ChatServer()
    agent = OptionsSeen(server, name="ra")
    channels = ChannelSet(factories_for([agent]))
    channel = await channels.sync(channel_key(agent), agent, list)
    assert isinstance(channel, ServiceChannel)
    await channel.invoke(agent, options=ChatOptions(temperature=0.1))
    await channel.invoke(agent)
    assert [o.temperature if o else None for o in agent.seen] == [0.1, None]


# -- catching up from the history log (a runtime that copies messages) ---------------------


async def test_two_thread_kinds_say_the_same_on_a_runtime_that_copies_messages() -> None:
    async def run(runtime: LocalRuntime | None) -> tuple[list[str], list[list[str]]]:
        server = ChatServer()
        agents = [counting_agent("la"), ServerAgent(server, name="ra")]
        agents += [counting_agent("lb"), ServerAgent(server, name="rb")]
        team = GroupChat(agents, max_turns=6)
        session = team.create_session(runtime=runtime)
        first = [m.text for m in (await session.run("topic")).messages]
        second = [m.text for m in (await session.run("more")).messages]
        kept = [[m.text for m in c] for c in server.conversations.values()]
        return first + second, kept

    expected = await run(None)
    async with LocalRuntime(serialize_messages=True) as copying:
        got = await run(copying)
    assert got == expected
    assert len(got[1]) == 1  # one server conversation, every message once
    assert got[1][0] == got[0]


async def test_catching_up_skips_what_the_channel_wrote_and_retries_a_failed_delivery() -> None:
    server = ChatServer()
    agent = ServerAgent(server, name="ra")
    key = channel_key(agent)
    channels = ReplicatedChannels(factories_for([agent]))
    history = [Message("user", "task")]
    channel = await channels.catch_up(key, agent, history)
    assert isinstance(channel, ServiceChannel)
    reply = await channel.invoke(agent)
    channels.wrote(key, reply.messages)
    history += [*reply.messages, Message("assistant", "other", author_name="lb")]
    server.fail_next = 1
    with pytest.raises(ChannelSyncError, match=r"failed to receive 1 message"):
        await channels.catch_up(key, agent, history)
    await channels.catch_up(key, agent, history)  # the same message, delivered now
    (conversation,) = server.conversations.values()
    assert [m.text for m in conversation] == ["task", "ra saw 1: task", "other"]


async def test_a_reply_that_never_reached_the_history_resets_the_channel() -> None:
    local = counting_agent("la")
    key = channel_key(local)
    channels = ReplicatedChannels(factories_for([local]))
    history = [Message("user", "task")]
    channel = await channels.catch_up(key, local, history)
    assert isinstance(channel, LocalChannel)
    orphan = await channel.invoke(local)  # its turn was cancelled: the team never said it
    channels.wrote(key, orphan.messages)
    history.append(Message("assistant", "lb says 1", author_name="lb"))
    channel = await channels.catch_up(key, local, history)
    assert isinstance(channel, LocalChannel)
    assert [m.text for m in channel.view("la")] == ["task", "lb says 1"]


async def test_catching_up_after_a_reduction_mirrors_the_reduced_history() -> None:
    local = counting_agent("la")
    key = channel_key(local)
    channels = ReplicatedChannels(factories_for([local]))
    history = [Message("user", str(i)) for i in range(4)]
    await channels.catch_up(key, local, history)
    summary = Reduction(len(history), [Message("user", "summary")])
    history.append(Message("user", "after"))
    channel = await channels.catch_up(key, local, history, [summary])
    assert isinstance(channel, LocalChannel)
    assert [m.text for m in channel.view("la")] == ["summary", "after"]
    history.append(Message("user", "later"))
    await channels.catch_up(key, local, history, [summary])  # applied once
    assert [m.text for m in channel.view("la")] == ["summary", "after", "later"]
