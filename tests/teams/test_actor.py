"""An Agent on the runtime as an actor: one thread per AgentId, state saved with the runtime."""

from __future__ import annotations

from cantata.runtime import (
    AgentId,
    LocalRuntime,
    MessageContext,
    RoutedAgent,
    TopicId,
    TypeSubscription,
    event,
)
from cantata.teams.actor import AgentReply, AgentTask, register_agent

from ._agents import counting_agent

heard: list[str] = []


class Listener(RoutedAgent):
    """Core-level code that hears what an agent actor replies on a topic."""

    @event
    async def on_reply(self, message: AgentReply, ctx: MessageContext) -> None:
        heard.append(message.text)


async def test_each_agent_id_keeps_its_own_thread() -> None:
    runtime = LocalRuntime()
    kind = await register_agent(runtime, counting_agent("helper"))
    await runtime.start()
    try:
        a, b = AgentId(kind, "a"), AgentId(kind, "b")
        first = await runtime.send_message("hi", a)
        assert isinstance(first, AgentReply)
        assert first.text == "helper says 1"
        assert first.messages[-1].author_name == "helper"
        # the second message of conversation a sees the first exchange; b starts afresh
        assert (await runtime.send_message("again", a)).text == "helper says 3"
        assert (await runtime.send_message(AgentTask([]), b)).text == "helper says 0"
    finally:
        await runtime.stop()


async def test_published_tasks_run_the_agent_and_reply_to_a_topic() -> None:
    heard.clear()
    runtime = LocalRuntime()
    kind = await register_agent(runtime, counting_agent("echo"), agent_type="echoer")
    await runtime.register_factory("listener", Listener)
    await runtime.add_subscription(TypeSubscription("tasks", kind))
    await runtime.add_subscription(TypeSubscription("replies", "listener"))
    await runtime.start()
    await runtime.publish_message(AgentTask([], reply_topic="replies"), TopicId("tasks", "room1"))
    await runtime.stop_when_idle()
    assert heard == ["echo says 0"]


async def test_the_thread_is_saved_and_loaded_with_the_runtime_state() -> None:
    agent = counting_agent("memo")
    runtime = LocalRuntime()
    kind = await register_agent(runtime, agent)
    await runtime.start()
    await runtime.send_message("one", AgentId(kind, "k"))
    state = await runtime.save_state()
    await runtime.stop()

    fresh = LocalRuntime()
    await register_agent(fresh, agent)
    await fresh.load_state(state)
    await fresh.start()
    try:
        # the restored thread holds the first exchange: this message is the third
        assert (await fresh.send_message("two", AgentId(kind, "k"))).text == "memo says 3"
    finally:
        await fresh.stop()


async def test_a_whole_team_runs_as_an_actor() -> None:
    from cantata.teams import GroupChat

    team = GroupChat([counting_agent("x"), counting_agent("y")], max_turns=2, name="pair")
    runtime = LocalRuntime()
    kind = await register_agent(runtime, team.as_agent())
    await runtime.start()
    try:
        reply = await runtime.send_message("plan it", AgentId(kind, "job-1"))
        assert [(m.author_name, m.text) for m in reply.messages] == [
            ("x", "x says 1"),
            ("y", "y says 2"),
        ]
    finally:
        await runtime.stop()
