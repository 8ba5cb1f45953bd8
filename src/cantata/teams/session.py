"""`TeamSession`: one conversation of a team, run after run.

A session is one workflow run of the team's workflow that lives across team runs: when a
team run stops, the manager yields the `TaskResult` and waits on a request for the next
task; `run(task)` answers it. So the whole conversation is one run that checkpoints,
resumes in a fresh process (`Team.resume`), and is saved and loaded as JSON. A session
does one thing at a time; sessions of one team are independent and may run at once.

A run may also stop for a person in the middle: a participant's tool that needs approval,
a tool it declared without a function, magentic's plan review. The request is pending
(`pending_requests`, a `RequestInfoEvent` in `run_stream`), `run()` refuses to go on
until it is answered, and `send_responses` (or `send_responses_stream`) answers it; the
paused turn is in every checkpoint, so the answer may come to a resumed session too.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any, TypeAlias

from ..core import (
    CancellationToken,
    CancelledError,
    CheckpointError,
    Message,
    SchemaVersionError,
    Usage,
    UsageError,
    WorkflowError,
    new_id,
)
from ..models import ChatOptions
from ..workflows import (
    AgentUpdateEvent,
    CheckpointStore,
    InMemoryCheckpointStore,
    RequestInfoEvent,
    Workflow,
    WorkflowCheckpoint,
    WorkflowEvent,
    WorkflowRun,
    WorkflowRunResult,
)
from ..workflows.placement import _copies_messages
from ._control import CONTROL_KEY, RunControl, tell
from ._run_kwargs import CHANNELS_KEY, OPTIONS_KEY, TEAM_KEY
from .channels import TeamChannels
from .events import TeamEvent
from .manager import ManagerState, TeamManager
from .replication import ReplicatedChannels, register_channels
from .result import StopMessage, TaskResult
from .turns import AwaitingTask, TeamTask

if TYPE_CHECKING:
    from ..runtime import AgentRuntime
    from .team import Team

__all__ = ["STATE_SCHEMA_VERSION", "TaskInput", "TeamBusyError", "TeamSession"]

STATE_SCHEMA_VERSION = 1
"""Version of `save_state` data. 1: the checkpoint record, its values and its log entries."""

TaskInput: TypeAlias = str | Message | list[str | Message] | None
"""A team run's task: text, a message, a list of them, or None to continue."""

StreamItem: TypeAlias = WorkflowEvent | TaskResult


class TeamBusyError(UsageError):
    """The session is already running; one session does one thing at a time."""


class TeamSession:
    """One conversation of a team: `run`, `run_stream`, `reset`, `save_state`, `load_state`.

    Get one from `team.create_session()` (or use the team's own default session through
    `team.run`). Pass `checkpoint_store` to keep the conversation in a durable store
    (SQLite, PostgreSQL, ...): every step is checkpointed there, and `team.resume` picks
    the conversation up in another process. Without one nothing is checkpointed as it
    runs; `save_state` still saves the conversation, when asked.
    """

    def __init__(
        self,
        team: Team,
        *,
        checkpoint_store: CheckpointStore | None = None,
        runtime: AgentRuntime | None = None,
    ) -> None:
        self.team = team
        self._store = checkpoint_store
        self._runtime = runtime
        self._run: WorkflowRun | None = None
        self._copying = runtime is not None and _copies_messages(runtime)
        """Whether participants may run in other processes (then they get the session's
        key, and find or make its channels there)."""
        self._key = ""
        self._channels = self._new_channels()
        self._busy = False
        self._control = RunControl()
        self._options: ChatOptions | None = None
        """Chat options for every participant's turns (a served request's), in process."""
        self._snapshots: InMemoryCheckpointStore | None = None
        """Where a session without a store saves its state when asked (`save_state`): it
        writes no checkpoint as it runs, so a run costs nothing for a state nobody saves."""

    # -- what the session holds -----------------------------------------------------------

    @property
    def run_id(self) -> str | None:
        """The id of the workflow run holding this conversation (None before the first)."""
        return None if self._run is None else self._run.run_id

    @property
    def checkpoint_id(self) -> str | None:
        """The last checkpoint of the conversation in the session's store (None without
        one)."""
        if self._store is None:
            return None
        return None if self._run is None else self._run.checkpoint_id

    @property
    def usage(self) -> Usage:
        """The token usage of the session's current (or last) run: every turn's, of every
        participant (an eval or a bill reads it; a new run starts it afresh)."""
        state = self._manager_state()
        return Usage() if state is None else state.usage

    @property
    def channels(self) -> TeamChannels[Any]:
        """The session's channels (one per thread kind among the participants): a
        `ChannelSet` in process, `ReplicatedChannels` on a runtime that copies messages."""
        return self._channels

    @property
    def pending_requests(self) -> list[RequestInfoEvent]:
        """Requests for input a participant or the manager made, waiting for an answer
        (answer them with `send_responses`); the wait for the next task is not one."""
        if self._run is None:
            return []
        return [r for r in self._run.pending_requests if not isinstance(r.data, AwaitingTask)]

    @property
    def is_running(self) -> bool:
        """True while a run of this session is under way."""
        return self._busy

    # -- running --------------------------------------------------------------------------

    async def run(
        self,
        task: TaskInput = None,
        *,
        cancellation_token: CancellationToken | None = None,
        include_routing: bool = False,
    ) -> TaskResult:
        """Run the team on `task` until it stops; without a task, continue the conversation.

        A cancelled token stops the run within one turn and raises `CancelledError`;
        `run()` later finishes the interrupted turn and goes on. `include_routing=True`
        puts the run's routing decisions in `TaskResult.routing` (a streamed run yields
        them as `RoutingEvent`s either way).
        """
        result: TaskResult | None = None
        items = self._events(task, cancellation_token, streaming=False, routing=include_routing)
        async for item in items:
            if isinstance(item, TaskResult):
                result = item
        if result is None:  # pragma: no cover - run_stream always ends with a result
            raise WorkflowError(f"team {self.team.name!r} ended without a result")
        return result

    def run_stream(
        self,
        task: TaskInput = None,
        *,
        cancellation_token: CancellationToken | None = None,
        include_routing: bool = False,
    ) -> AsyncIterator[StreamItem]:
        """Run and yield as it happens: team events (each message of the transcript, each
        routing decision, the stop), the agents' chunks, requests for input, then the
        `TaskResult`. Leaving the loop early cancels the run."""
        return self._events(task, cancellation_token, streaming=True, routing=include_routing)

    async def _run_held(
        self,
        task: list[Message],
        *,
        context: list[Message],
        carry: dict[str, Any] | None,
        cancellation_token: CancellationToken | None,
        options: ChatOptions | None = None,
    ) -> TaskResult:
        """The first run of a session that takes up a conversation held elsewhere (a
        served team's thread): `context` joins the history before `task` without counting
        toward termination, and the manager takes up `carry` (see `TeamTask`)."""
        if self._run is not None:
            raise UsageError(f"team {self.team.name!r}: a held conversation starts a session")
        self._options = options
        result: TaskResult | None = None
        items = self._events(
            list[str | Message](task),
            cancellation_token,
            streaming=False,
            routing=False,
            context=context,
            carry=carry,
        )
        async for item in items:
            if isinstance(item, TaskResult):
                result = item
        if result is None:  # pragma: no cover - _events always ends with a result
            raise WorkflowError(f"team {self.team.name!r} ended without a result")
        return result

    def _manager_state(self) -> ManagerState | None:
        """The manager's state as the last run left it (None before the first)."""
        run = self._run
        if run is None:
            return None
        state = run._state.executor_states.get(self._workflow.start_id)
        return state if isinstance(state, ManagerState) else None

    def _carry(self) -> dict[str, Any] | None:
        """What the manager keeps between runs, as JSON (see `TeamManager.carry`)."""
        state = self._manager_state()
        manager = self._workflow.executors.get(self._workflow.start_id)
        if state is None or not isinstance(manager, TeamManager):
            return None
        return manager.carry(state)

    async def _events(
        self,
        task: TaskInput,
        cancellation_token: CancellationToken | None,
        *,
        streaming: bool,
        routing: bool,
        context: list[Message] | None = None,
        carry: dict[str, Any] | None = None,
    ) -> AsyncIterator[StreamItem]:
        self._enter()
        try:
            start = TeamTask(Message.coerce(task), routing, context or [], carry)
            manager = self._workflow.executors.get(self._workflow.start_id)
            if isinstance(manager, TeamManager):
                manager.validate_task(self._manager_state(), start.messages)
            before = 0 if self._run is None else len(self._run.outputs)
            if streaming:
                stream = self._drive_stream(start, cancellation_token)
                async with stream:
                    async for event in stream:
                        if _shown(event):
                            yield event
                    outcome = stream.result
            else:
                outcome = await self._drive(start, cancellation_token)
            yield self._result_of(outcome, before)
        finally:
            self._leave()

    def _enter(self) -> None:
        if self._busy:
            raise TeamBusyError(
                f"team {self.team.name!r} is already running in this session; wait for that "
                "run to end, or use team.create_session() for an independent conversation"
            )
        self._busy = True
        self._control.begin()

    def _leave(self) -> None:
        self._busy = False
        self._control.stopping = False  # a stop() asks the run under way, not the next one

    # -- from another task: pause, resume, stop ---------------------------------------------

    async def pause(self) -> None:
        """Pause the team: tell the participants (each agent with an ``on_pause()`` method
        has it awaited), and hold the run at its next turn boundary (the turn under way
        finishes) until `resume`. `run()` does not return meanwhile, as in AutoGen; a run
        started while paused waits at its first turn. A checkpoint store has every turn
        before the pause, so a paused session may also be resumed elsewhere."""
        self._check_controllable("pause")
        self._control.pause()
        await tell(self.team.participants, "on_pause")

    async def resume(self) -> None:
        """Resume a paused team: tell the participants (``on_resume()``), then the same
        run goes on from the turn boundary where it waited."""
        self._check_controllable("resume")
        await tell(self.team.participants, "on_resume")
        self._control.resume()

    @property
    def is_paused(self) -> bool:
        """True between `pause` and `resume`."""
        return self._control.paused

    def stop(self) -> None:
        """Stop the run under way at its next turn boundary (the turn under way finishes;
        a paused run stops at once, and the session stays paused until `resume`): `run()`
        returns its `TaskResult`, whose stop message has the source ``"stop"``, and the next
        `run()` goes on from there. Nothing happens when no run is under way."""
        self._check_controllable("stop")
        if self._busy:
            self._control.stop()

    def _check_controllable(self, what: str) -> None:
        if self._copying:
            raise UsageError(
                f"team {self.team.name!r}: {what}() reaches a run in this process only, and "
                "this session runs on a runtime that may place its manager elsewhere; use a "
                "cancellation token (run() without a task goes on) or an External condition"
            )

    def _waiting_request(self) -> str | None:
        run = self._run
        if run is None or run.status != "idle_with_pending_requests":
            return None
        for request in run.pending_requests:
            if isinstance(request.data, AwaitingTask):
                return request.request_id
        return None

    def _new_channels(self) -> TeamChannels[Any]:
        """Fresh channels of the kind this session uses, the one place it is chosen; a
        copying session's under a new session key (a remote process's channel sets of the
        old key are then never read again)."""
        channels = self.team._new_channels(copying=self._copying)
        if isinstance(channels, ReplicatedChannels):
            self._key = f"{self.team.name}.{new_id()}"
            register_channels(self._key, channels)
        return channels

    def _kwargs(self) -> dict[str, Any]:
        if self._copying:
            return {CHANNELS_KEY: self._key, TEAM_KEY: self.team.name}
        kwargs = {
            CHANNELS_KEY: self._channels,
            TEAM_KEY: self.team.name,
            CONTROL_KEY: self._control,
        }
        if self._options is not None:
            kwargs[OPTIONS_KEY] = self._options
        return kwargs

    @property
    def _workflow(self) -> Workflow:
        return self.team.workflow_for(self._runtime)

    async def _drive(self, task: TeamTask, token: CancellationToken | None) -> WorkflowRunResult:
        run = self._run
        if run is None:
            workflow = self._workflow
            result = await workflow.run(
                task,
                runtime=self._runtime,
                checkpoint_store=self._store,
                kwargs=self._kwargs(),
                cancellation_token=token,
            )
            self._run = result.run
            return result
        waiting = self._waiting_request()
        if waiting is not None:
            return await run.send_responses({waiting: task}, cancellation_token=token)
        self._check_continuable(run, task.messages)
        return await run.continue_run(cancellation_token=token)

    def _drive_stream(self, task: TeamTask, token: CancellationToken | None) -> Any:
        run = self._run
        if run is None:
            stream = self._workflow.run_stream(
                task,
                runtime=self._runtime,
                checkpoint_store=self._store,
                kwargs=self._kwargs(),
                cancellation_token=token,
            )
            return stream
        waiting = self._waiting_request()
        if waiting is not None:
            return run.send_responses_stream({waiting: task}, cancellation_token=token)
        self._check_continuable(run, task.messages)
        return run.continue_run_stream(cancellation_token=token)

    def _check_continuable(self, run: WorkflowRun, messages: list[Message]) -> None:
        others = [r for r in run.pending_requests if not isinstance(r.data, AwaitingTask)]
        if others:
            raise UsageError(
                f"team {self.team.name!r} waits for answers to requests "
                f"{[r.request_id for r in others]}; answer them with session.send_responses()"
            )
        if messages:
            raise UsageError(
                f"team {self.team.name!r} was stopped in the middle of a run (status "
                f"{run.status!r}); call run() without a task to finish it, or reset() first"
            )

    def _result_of(self, outcome: WorkflowRunResult, before: int) -> TaskResult:
        if self._run is None:
            self._run = outcome.run
        if outcome.status == "cancelled":
            raise CancelledError(
                f"team {self.team.name!r} was cancelled; run() without a task finishes the "
                "interrupted turn and goes on, reset() starts over"
            )
        for output in reversed(outcome.outputs[before:]):
            if isinstance(output, TaskResult):
                return output
        pending = [r.request_id for r in outcome.pending_requests]
        return TaskResult([], StopMessage(f"waiting for answers to requests {pending}", "input"))

    async def send_responses(
        self,
        responses: Mapping[str, Any],
        *,
        cancellation_token: CancellationToken | None = None,
    ) -> TaskResult:
        """Answer requests a participant or the manager made (a tool's approval, a declared
        tool's result, a plan review; not the next task: use `run`) and go on."""
        self._enter()
        try:
            run = self._answerable()
            before = len(run.outputs)
            outcome = await run.send_responses(responses, cancellation_token=cancellation_token)
            return self._result_of(outcome, before)
        finally:
            self._leave()

    def send_responses_stream(
        self,
        responses: Mapping[str, Any],
        *,
        cancellation_token: CancellationToken | None = None,
    ) -> AsyncIterator[StreamItem]:
        """`send_responses`, yielding what happens as `run_stream` does, then the result."""
        return self._answer_events(responses, cancellation_token)

    async def _answer_events(
        self, responses: Mapping[str, Any], token: CancellationToken | None
    ) -> AsyncIterator[StreamItem]:
        self._enter()
        try:
            run = self._answerable()
            before = len(run.outputs)
            stream = run.send_responses_stream(responses, cancellation_token=token)
            async with stream:
                async for event in stream:
                    if _shown(event):
                        yield event
                outcome = stream.result
            yield self._result_of(outcome, before)
        finally:
            self._leave()

    def _answerable(self) -> WorkflowRun:
        if self._run is None:
            raise UsageError(f"team {self.team.name!r} has not run in this session yet")
        return self._run

    # -- reset, save, load ------------------------------------------------------------------

    async def reset(self) -> None:
        """Forget the conversation: the next run starts from nothing (every participant's
        part of it lives in the session, so all of them are reset)."""
        self._enter()
        try:
            self._run = None
            self._snapshots = None
            await self._channels.close()
            self._channels = self._new_channels()
        finally:
            self._busy = False

    async def save_state(self) -> dict[str, Any]:
        """The conversation as JSON data (its last checkpoint, with every value and log
        entry it refers to); `load_state` takes it back, in any process."""
        if self._busy:
            raise TeamBusyError(f"team {self.team.name!r} is running; save its state after")
        run = self._run
        if run is None:
            return {"schema_version": STATE_SCHEMA_VERSION, "team": self.team.name, "run": None}
        store = self._store
        if store is None:
            if self._snapshots is None:
                self._snapshots = InMemoryCheckpointStore()
            store = self._snapshots
            checkpoint_id = await run.save_checkpoint(store)
        elif run.checkpoint_id is None:  # pragma: no cover - a run with a store has one
            raise UsageError(f"team {self.team.name!r} has no checkpoint to save yet")
        else:
            checkpoint_id = run.checkpoint_id
        checkpoint = await store.load(checkpoint_id)
        values = {
            ref: await store.read_value(ref)
            for ref in [*checkpoint.state_refs.values(), *checkpoint.executor_refs.values()]
        }
        logs: dict[str, list[Any]] = {}
        for segments in [*checkpoint.logs.values(), checkpoint.outputs]:
            for segment, count in segments:
                if count > len(logs.get(segment, [])):
                    logs[segment] = await store.read_log(segment, count)
        return {
            "schema_version": STATE_SCHEMA_VERSION,
            "team": self.team.name,
            "run": {"checkpoint": checkpoint.to_record(), "values": values, "logs": logs},
        }

    async def load_state(self, state: Mapping[str, Any]) -> None:
        """Continue the conversation `save_state` wrote (this session's is replaced)."""
        self._enter()
        try:
            saved = _check_state(state, self.team.name)
            await self._channels.close()
            self._channels = self._new_channels()
            if saved is None:
                self._run = None
                return
            checkpoint = WorkflowCheckpoint.from_record(
                saved["checkpoint"], checkpoint_id=str(saved["checkpoint"].get("checkpoint_id"))
            )
            store: CheckpointStore | None = self._store
            if store is None:  # restored from a snapshot store, then run without one
                store = self._snapshots = InMemoryCheckpointStore()
            if not await _has_checkpoint(store, checkpoint.checkpoint_id):
                await store.save(
                    checkpoint,
                    values=saved["values"],
                    log_appends={seg: (0, list(entries)) for seg, entries in saved["logs"].items()},
                )
            run = await self._workflow.restore(
                checkpoint.checkpoint_id,
                checkpoint_store=store,
                runtime=self._runtime,
                kwargs=self._kwargs(),
            )
            if self._store is None:
                run.detach_checkpoint_store()
            self._run = run
        finally:
            self._busy = False

    async def _restore(self, checkpoint_id: str) -> None:
        """Pick the conversation up at a checkpoint of this session's store."""
        if self._store is None:
            raise UsageError("resuming a team needs its checkpoint_store")
        self._run = await self._workflow.restore(
            checkpoint_id,
            checkpoint_store=self._store,
            runtime=self._runtime,
            kwargs=self._kwargs(),
        )

    async def close(self) -> None:
        """Stop channel deliveries under way (the conversation itself is kept)."""
        await self._channels.close()


def _shown(event: WorkflowEvent) -> bool:
    """Whether `run_stream` yields a workflow event: team events, agent chunks, and
    requests for input other than the wait for the next task."""
    if isinstance(event, TeamEvent | AgentUpdateEvent):
        return True
    return isinstance(event, RequestInfoEvent) and not isinstance(event.data, AwaitingTask)


async def _has_checkpoint(store: CheckpointStore, checkpoint_id: str) -> bool:
    try:
        await store.load(checkpoint_id)
    except CheckpointError:
        return False
    return True


def _check_state(state: Mapping[str, Any], team: str) -> dict[str, Any] | None:
    if not isinstance(state, Mapping):
        raise CheckpointError(f"team state must be a JSON object, got {type(state).__name__}")
    version = state.get("schema_version")
    if type(version) is not int or version != STATE_SCHEMA_VERSION:
        raise SchemaVersionError(
            f"team state schema_version {version!r} is not supported (this cantata reads "
            f"{STATE_SCHEMA_VERSION}); save it again with this version"
        )
    if state.get("team") != team:
        raise CheckpointError(
            f"this state was saved by team {state.get('team')!r}, not {team!r}; load it into "
            "a session of the team that saved it"
        )
    saved = state.get("run")
    if saved is None:
        return None
    if (
        not isinstance(saved, Mapping)
        or not isinstance(saved.get("checkpoint"), Mapping)
        or not isinstance(saved.get("values"), Mapping)
        or not isinstance(saved.get("logs"), Mapping)
        or not all(isinstance(v, list) for v in saved["logs"].values())
    ):
        raise CheckpointError(
            f"team state of {team!r} is damaged: 'run' needs 'checkpoint', 'values' and 'logs'"
        )
    return dict(saved)
