"""Run in a child process by test_resume.py: either crash in the middle of a team run that
checkpoints to SQLite, or resume the last checkpoint and print the transcript as JSON."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Sequence

from cantata.agents import ChatAgent
from cantata.core import Message
from cantata.models import ScriptedChatClient
from cantata.stores import SQLiteStore
from cantata.teams import GroupChat, TextMention
from cantata.workflows import StateStoreCheckpointStore

CRASH_AT = int(os.environ.get("CRASH_AT", "0"))


def _agent(name: str) -> ChatAgent:
    def answer(messages: Sequence[Message], options: object) -> str:
        n = len(messages)
        if name == "critic" and CRASH_AT and n >= CRASH_AT:
            os._exit(3)  # a hard crash: nothing is flushed, nothing is cleaned up
        return f"{name} {n}" + (" APPROVE" if name == "critic" and n >= 8 else "")

    return ChatAgent(ScriptedChatClient(answer), name=name)


def team() -> GroupChat:
    """The definition both processes build (the same code, as a deployment would)."""
    return GroupChat(
        [_agent("writer"), _agent("critic")], termination=TextMention("APPROVE"), max_turns=20
    )


async def crash(path: str) -> None:
    store = StateStoreCheckpointStore(SQLiteStore(path))
    await team().create_session(checkpoint_store=store).run("write")


async def resume(path: str) -> None:
    store = StateStoreCheckpointStore(SQLiteStore(path))
    checkpoints = await store.list_checkpoints()
    session = await team().resume(checkpoints[-1].checkpoint_id, checkpoint_store=store)
    result = await session.run()
    print(
        json.dumps(
            {
                "transcript": [[m.author_name, m.text] for m in result.messages],
                "stop": result.stop_reason,
            }
        )
    )
    await store.close()


if __name__ == "__main__":
    mode, path = sys.argv[1], sys.argv[2]
    asyncio.run(crash(path) if mode == "crash" else resume(path))
