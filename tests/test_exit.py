"""Nothing left unclosed keeps the interpreter from exiting: a runtime with agents still
busy, an agent and its client, a workflow run in flight. (Stores and model clients have
their own exit tests beside them.)"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

PROGRAMS = {
    "runtime with a busy agent": """
        import asyncio
        from cantata.runtime import AgentId, LocalRuntime, MessageContext, RoutedAgent
        from cantata.runtime import message_handler

        class Slow(RoutedAgent):
            @message_handler
            async def on(self, message: str, ctx: MessageContext) -> str:
                await asyncio.sleep(3600)
                return message

        async def main() -> None:
            runtime = LocalRuntime()
            await runtime.register_factory("slow", Slow, agent_class=Slow)
            await runtime.start()
            asyncio.ensure_future(runtime.send_message("x", AgentId("slow", "k")))
            await asyncio.sleep(0.1)   # the handler is waiting; return without stop or close

        asyncio.run(main())
    """,
    "agent and client": """
        import asyncio
        from cantata import ChatAgent, ScriptedChatClient

        async def main() -> None:
            agent = ChatAgent(ScriptedChatClient(["hi"]), name="a", owns_client=True)
            print((await agent.run("hello")).text)   # never closed

        asyncio.run(main())
    """,
    "workflow run left streaming": """
        import asyncio
        from cantata import WorkflowBuilder, executor

        @executor(id="wait")
        async def wait(message: str, ctx) -> None:
            await asyncio.sleep(3600)

        async def main() -> None:
            stream = WorkflowBuilder(wait).build().run_stream("x")
            async for event in stream:
                break                                  # left without closing the stream

        asyncio.run(main())
    """,
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_the_interpreter_exits(name: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(PROGRAMS[name])],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
