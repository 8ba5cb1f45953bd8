"""Magentic-One's specialists, made of the tools in `cantata.tools`: a coder (a model that
writes Python and runs it), a terminal (`CodeRunnerAgent`, which runs the code others wrote,
without a model) and a file reader. They are agents, so they live above the tools they use.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from ..agents import Agent, AgentInput, AgentResponse, AgentThread, ChatAgent, IntermediateCallback
from ..core import CancellationToken, Message
from ..models import ChatClient, ChatOptions
from ..tools.code_executor import MAX_CODE_CHARS, LocalCodeExecutor, extract_code, python_tool
from ..tools.file_tools import FileTools

__all__ = ["CodeRunnerAgent", "coder_agent", "file_reader_agent"]


def coder_agent(
    client: ChatClient,
    executor: LocalCodeExecutor,
    *,
    name: str = "coder",
    instructions: str | None = None,
    max_code_chars: int = MAX_CODE_CHARS,
    options: ChatOptions | None = None,
) -> ChatAgent:
    """A model that writes Python and runs it with `python_tool` (Magentic-One's coder and
    terminal in one). Its first request must call the tool, so it always runs something;
    `options` add to that (a small model wants ``temperature=0`` and a short script)."""
    return ChatAgent(
        client,
        name=name,
        description="Writes and runs Python code to compute things; reports the output.",
        instructions=instructions
        or "You solve tasks by running Python. Call run_python with a short script that "
        "prints the answer, then report the output.",
        tools=[python_tool(executor, max_code_chars=max_code_chars)],
        options=replace(options or ChatOptions(), tool_choice="required"),
    )


class CodeRunnerAgent(Agent):
    """An agent without a model: it runs the fenced Python blocks of the last message
    that has some (or, with ``run_bare_text=True``, that message's whole text) and answers
    with their output. The terminal of AutoGen's Magentic-One, for code a manager or
    another agent wrote."""

    def __init__(
        self,
        executor: LocalCodeExecutor,
        *,
        name: str = "code_runner",
        description: str = "Runs the Python code in the last message and reports the output.",
        run_bare_text: bool = False,
    ) -> None:
        super().__init__(name=name, description=description)
        self.executor = executor
        self.run_bare_text = run_bare_text

    async def run(
        self,
        messages: AgentInput = None,
        *,
        thread: AgentThread | None = None,
        on_intermediate: IntermediateCallback | None = None,
        arguments: Mapping[str, Any] | None = None,
        options: ChatOptions | None = None,
        tools: Iterable[Any] | None = None,
        cancellation_token: CancellationToken | None = None,
        **kwargs: Any,
    ) -> AgentResponse:
        """Run the code found in the conversation (see the class docstring)."""
        used = self._thread_for_run(thread)
        await used.on_new_message(self._incoming(messages))
        history = await used.get_messages()
        blocks = self._code_in(history)
        if cancellation_token is not None:
            cancellation_token.raise_if_cancelled()
        if not blocks:
            text = "No Python code to run: put it in a ```python fenced block."
        else:
            results = [await self.executor.run(block) for block in blocks]
            text = "\n\n".join(r.as_text() for r in results)
        answer = Message("assistant", text, author_name=self.name)
        await used.on_new_message([answer])
        return AgentResponse([answer], thread=used, agent_id=self.id, finish_reason="stop")

    def _code_in(self, history: list[Message]) -> list[str]:
        for message in reversed(history):
            if message.author_name == self.name:
                continue
            text = message.text
            blocks = extract_code(text)
            if blocks:
                return blocks
            if self.run_bare_text and text.strip():
                return [text]
        return []


def file_reader_agent(
    client: ChatClient,
    root: str | os.PathLike[str],
    *,
    name: str = "file_reader",
    list_in_schema: bool = True,
    include_listing: bool = True,
    max_bytes: int = 16_000,
    instructions: str | None = None,
) -> ChatAgent:
    """A specialist that answers from the files under `root` (Magentic-One's file surfer).

    Its first model request must call a tool (``tool_choice="required"``; the loop relaxes
    it afterwards), so even a tiny model reads before it answers; with
    ``include_listing=False`` it has only ``read_file``, so that first call is a read.
    """
    files = FileTools(root, max_bytes=max_bytes, list_in_schema=list_in_schema)
    tools = files.tools()
    if not include_listing:
        tools = [t for t in tools if t.name != "list_files"]
    return ChatAgent(
        client,
        name=name,
        description="Reads text files under a given folder and reports what they say.",
        instructions=instructions
        or "You read files to answer. Call read_file, then report what the file says.",
        tools=tools,
        options=ChatOptions(tool_choice="required"),
    )
