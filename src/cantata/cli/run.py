"""`cantata run spec.yaml "task"`: run an agent, team or workflow spec, its output streamed.

What each step does is shown as it happens: who speaks, tool calls and their results,
routing decisions and why the run stopped. On a terminal Rich colours it; piped, it is
plain text; ``--json`` writes one JSON object per line instead. With a checkpoint store
(``--store URL``, or ``checkpoint_store:`` in a team spec) a team run says its last
checkpoint, and ``--resume ID`` continues the conversation saved there.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.text import Text

from .console import read_stdin, run_body
from .spec_options import AllowOption, SettingOption, parse_settings

__all__ = ["RUN_FLAGS", "run_command"]

RUN_FLAGS = frozenset(
    {"--json", "--resume", "--store", "--setting", "--allow", "--debug", "--verbose"}
)
"""The options of `cantata run`: the flags its error lines may name."""


def run_command(
    spec: Annotated[
        str,
        typer.Argument(help="The spec file (.yaml, .yml or .json) of an agent, team or workflow."),
    ],
    task: Annotated[str, typer.Argument(help="The task; '-' reads it from stdin.")] = "",
    as_json: Annotated[bool, typer.Option("--json", help="One JSON event per line.")] = False,
    resume: Annotated[
        str | None,
        typer.Option("--resume", help="Continue a team or workflow from this checkpoint id."),
    ] = None,
    store: Annotated[
        str | None,
        typer.Option("--store", help="Checkpoint store URL (sqlite:///file.db, memory://, ...)."),
    ] = None,
    setting: SettingOption = None,
    allow: AllowOption = None,
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks of failures.")] = False,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Log what cantata does (DEBUG) to stderr.")
    ] = False,
) -> None:
    """Run an agent, team or workflow spec on a task, its steps streamed
    (`cantata serve spec.yaml` serves the same spec over HTTP)."""
    from .answer import quiet_loop_errors

    def work() -> None:
        text = (read_stdin() if task == "-" else task).strip()
        out = _Output(Console(highlight=False, soft_wrap=True), as_json=as_json)
        with asyncio.Runner() as runner:
            quiet_loop_errors(runner.get_loop(), debug=debug)
            runner.run(
                _main(spec, text, out, resume=resume, store_url=store,
                      settings=parse_settings(setting or []), allow=allow or [])
            )  # fmt: skip

    run_body(work, debug=debug, verbose=verbose, flags=RUN_FLAGS)


async def _main(
    spec_path: str,
    task: str,
    out: _Output,
    *,
    resume: str | None,
    store_url: str | None,
    settings: dict[str, str],
    allow: list[str],
) -> None:
    from ..agents import Agent
    from ..core import UsageError
    from ..declarative import load, parse_spec

    spec = parse_spec(spec_path, settings=settings)
    component = load(spec_path, settings=settings, allow=allow)
    url = store_url or getattr(spec, "checkpoint_store", None)
    if isinstance(component, Agent):
        if resume is not None:
            raise UsageError("--resume continues a team; an agent spec has no checkpoints")
        if not task:
            raise UsageError("the task is empty; pass it as an argument or on stdin")
        async with component:
            await _run_agent(component, task, out)
        return
    from ..workflows import Workflow

    if isinstance(component, Workflow):
        await _run_workflow(component, task, out, resume=resume, store_url=url)
        return
    await _run_team(component, task, out, resume=resume, store_url=url)


async def _run_agent(agent: Any, task: str, out: _Output) -> None:
    out.speaker(agent.name)
    async for update in agent.run_stream(task):
        out.contents(update.author_name or agent.name, update.contents, streamed=True)
    out.end_text()
    out.event({"event": "done", "agent": agent.name})


async def _run_team(
    team: Any, task: str, out: _Output, *, resume: str | None, store_url: str | None
) -> None:
    from ..core import UsageError
    from ..stores import open_store
    from ..workflows import StateStoreCheckpointStore

    if resume is not None and store_url is None:
        raise UsageError("--resume needs a checkpoint store: pass --store URL")
    state = open_store(store_url) if store_url is not None else None
    checkpoints = StateStoreCheckpointStore(state) if state is not None else None
    try:
        if resume is not None and checkpoints is not None:
            session = await team.resume(resume, checkpoint_store=checkpoints)
        else:
            session = team.create_session(checkpoint_store=checkpoints)
        if not task and resume is None:
            raise UsageError("the task is empty; pass it as an argument or on stdin")
        await _show_team(session.run_stream(task or None), out)
        if checkpoints is not None and session.run_id is not None:
            saved = await checkpoints.list_checkpoints(run_id=session.run_id)
            if saved:
                out.checkpoint(saved[-1].checkpoint_id)
    finally:
        for p in team.participants:
            await p.aclose()
        if state is not None:
            await state.close()


async def _run_workflow(
    workflow: Any, task: str, out: _Output, *, resume: str | None, store_url: str | None
) -> None:
    from ..core import UsageError
    from ..declarative import workflow_agents
    from ..stores import open_store
    from ..workflows import StateStoreCheckpointStore

    if resume is not None and store_url is None:
        raise UsageError("--resume needs a checkpoint store: pass --store URL")
    if resume is None and not task:
        raise UsageError("the task is empty; pass it as an argument or on stdin")
    state = open_store(store_url) if store_url is not None else None
    checkpoints = StateStoreCheckpointStore(state) if state is not None else None
    try:
        if resume is not None:
            events = workflow.resume_stream(resume, checkpoint_store=checkpoints)
        else:
            events = workflow.run_stream(task, checkpoint_store=checkpoints)
        await _show_workflow(events, out)
    finally:
        for agent in workflow_agents(workflow):
            await agent.aclose()
        if state is not None:
            await state.close()


async def _show_workflow(events: AsyncIterator[Any], out: _Output) -> None:
    from ..workflows import (
        AgentUpdateEvent,
        ExecutorInvokedEvent,
        OutputEvent,
        SuperstepCompletedEvent,
        WorkflowFailedEvent,
    )

    last: str | None = None
    async for event in events:
        if isinstance(event, ExecutorInvokedEvent) and event.executor_id != last:
            last = event.executor_id
            out.speaker(event.executor_id)
        elif isinstance(event, AgentUpdateEvent):
            out.contents(event.executor_id, event.data.contents, streamed=True)
        elif isinstance(event, SuperstepCompletedEvent) and event.checkpoint_id:
            out.end_text()
            out.checkpoint(event.checkpoint_id)
        elif isinstance(event, OutputEvent):
            out.end_text()
            out.event({"event": "output", "executor": event.executor_id,
                       "text": getattr(event.data, "text", str(event.data))})  # fmt: skip
        elif isinstance(event, WorkflowFailedEvent):
            out.note(f"failed: {event}", {"event": "failed", "detail": str(event)})
    out.end_text()
    out.event({"event": "done"})


async def _show_team(events: AsyncIterator[Any], out: _Output) -> None:
    from ..core import FunctionCallContent, FunctionResultContent
    from ..teams import RoutingEvent, TaskResult, TeamMessageEvent, TeamStoppedEvent
    from ..workflows import AgentUpdateEvent

    tools = (FunctionCallContent, FunctionResultContent)
    # The transcript hides a turn's tool traffic unless it ends the turn, so tool calls and
    # results are shown from the agents' chunks as they happen, and text from the transcript.
    shown: set[tuple[type, str]] = set()
    speaking: str | None = None
    async for event in events:
        if isinstance(event, AgentUpdateEvent):
            calls = [c for c in event.data.contents if isinstance(c, tools)]
            if calls:
                if speaking != event.executor_id:
                    speaking = event.executor_id
                    out.speaker(speaking)
                out.contents(speaking, calls, streamed=False)
                shown.update((type(c), c.call_id) for c in calls)
        elif isinstance(event, TeamMessageEvent):
            if event.source != "user":
                rest = [
                    c
                    for c in event.message.contents
                    if not (isinstance(c, tools) and (type(c), c.call_id) in shown)
                ]
                if speaking != event.source:
                    out.speaker(event.source)
                speaking = None
                out.contents(event.source, rest, streamed=False)
                out.end_text()
        elif isinstance(event, RoutingEvent):
            out.routing(event.choice, event.reason, event.fallback_used, event.candidates)
        elif isinstance(event, TeamStoppedEvent):
            msg = event.stop_message
            out.note(f"stopped: {msg.content}", {"event": "stopped", "reason": msg.content,
                                                 "source": msg.source})  # fmt: skip
        elif isinstance(event, TaskResult):
            out.event({"event": "done", "messages": len(event.messages)})


class _Output:
    """Where the run is shown: a console (styled on a terminal) or JSON lines."""

    def __init__(self, console: Console, *, as_json: bool) -> None:
        self.console = console
        self.as_json = as_json
        self._in_text = False

    def event(self, data: dict[str, Any]) -> None:
        if self.as_json:
            self.console.print(json.dumps(data, default=str), markup=False, highlight=False)

    def _line(self, text: str, style: str) -> None:
        if not self.as_json:
            self.end_text()
            self.console.print(Text(text, style=style))

    def speaker(self, name: str) -> None:
        self._line(f"[{name}]", "bold cyan")
        self.event({"event": "speaker", "name": name})

    def note(self, text: str, data: dict[str, Any]) -> None:
        self._line(text, "dim")
        self.event(data)

    def routing(self, choice: str, reason: str, fallback: bool, candidates: list[str]) -> None:
        extra = " (fallback)" if fallback else ""
        self._line(f"-> {choice}: {reason}{extra}", "magenta")
        self.event({"event": "routing", "choice": choice, "reason": reason,
                    "fallback_used": fallback, "candidates": candidates})  # fmt: skip

    def checkpoint(self, checkpoint_id: str) -> None:
        self._line(f"checkpoint: {checkpoint_id}", "dim")
        self.event({"event": "checkpoint", "checkpoint_id": checkpoint_id})

    def contents(self, author: str, contents: list[Any], *, streamed: bool) -> None:
        from ..core import FunctionCallContent, FunctionResultContent, TextContent

        for c in contents:
            if isinstance(c, TextContent) and c.text:
                self._text(author, c.text, streamed=streamed)
            elif isinstance(c, FunctionCallContent):
                args = c.arguments if isinstance(c.arguments, str) else json.dumps(c.arguments)
                self._line(f"  tool call {c.name}({args})", "yellow")
                self.event({"event": "tool_call", "agent": author, "name": c.name,
                            "arguments": c.arguments, "call_id": c.call_id})  # fmt: skip
            elif isinstance(c, FunctionResultContent):
                shown = c.error if c.error is not None else c.result
                self._line(f"  tool result: {str(shown)[:500]}", "green")
                self.event({"event": "tool_result", "agent": author, "call_id": c.call_id,
                            "result": c.result, "error": c.error})  # fmt: skip

    def _text(self, author: str, text: str, *, streamed: bool) -> None:
        self.event({"event": "text", "agent": author, "text": text})
        if not self.as_json:
            self.console.print(text, end="" if streamed else "\n", markup=False)
            self._in_text = streamed

    def end_text(self) -> None:
        if self._in_text and not self.as_json:
            self.console.print()
        self._in_text = False
