"""A thread handed to agent executors is stored under a key every process finds again."""

from __future__ import annotations

from cantata.agents import ChatAgent, LocalThread, ServiceThread
from cantata.models import ScriptedChatClient
from cantata.workflows import AgentExecutor


class _NotYetCreated(ServiceThread):
    """A service thread before its first turn: it has no id yet."""

    async def _create_on_service(self) -> str:
        return "made-on-service"

    async def _delete_on_service(self, thread_id: str) -> None:
        return None


def _executors(thread: object) -> tuple[AgentExecutor, AgentExecutor]:
    def agent(name: str) -> ChatAgent:
        return ChatAgent(ScriptedChatClient(["ok"]), name=name)

    return (
        AgentExecutor(agent("writer"), thread=thread),  # type: ignore[arg-type]
        AgentExecutor(agent("critic"), thread=thread),  # type: ignore[arg-type]
    )


def test_a_shared_thread_without_an_id_is_keyed_by_its_first_executor() -> None:
    thread = _NotYetCreated()
    writer, critic = _executors(thread)
    assert writer._thread_key == critic._thread_key == "thread.of.writer"


def test_the_key_is_the_same_when_the_workflow_is_built_again_elsewhere() -> None:
    first = _executors(_NotYetCreated())
    again = _executors(_NotYetCreated())  # a fresh process would build the same objects
    assert [e._thread_key for e in first] == [e._thread_key for e in again]
    assert "obj" not in first[0]._thread_key


def test_a_thread_with_an_id_is_keyed_by_it() -> None:
    thread = LocalThread()
    writer, _ = _executors(thread)
    assert writer._thread_key == f"thread.{thread.id}"
