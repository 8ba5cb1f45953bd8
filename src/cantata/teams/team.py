"""`Team`: the base of every team type. A team IS a workflow.

A team definition is immutable: its participants, its rules, and the workflow it builds
once (a `TeamManager` executor and one executor per participant, passing a turn token).
Conversations live in sessions: `create_session()` gives an independent one (any number
may run at once), and the team's own default session serves AutoGen-style code:
``await team.run(task)``, ``await team.run()`` to continue, ``await team.reset()``.

A session given a runtime that copies messages (``RayRuntime``, or
``LocalRuntime(serialize_messages=True)``) runs the same workflow with each participant on
an actor of its own (`workflow_for`), in whatever process the runtime puts it; the team's
code and its transcript are the same (see `channels.py` for how the history reaches it).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..agents import Agent, AgentThread, Guardrail
from ..core import CancellationToken, ConfigurationError, UsageError
from ..core._serving import mcp_server
from ..workflows import Executor, Workflow, WorkflowBuilder
from ..workflows.placement import _copies_messages
from .broadcast import ChannelSet
from .channels import ChannelFactory, TeamChannels, factories_for
from .manager import TeamManager
from .participant import ParticipantExecutor
from .replication import ReplicatedChannels
from .result import TaskResult
from .session import StreamItem, TaskInput, TeamSession
from .turn_guard import turn_guardrails

if TYPE_CHECKING:
    from ..runtime import AgentRuntime
    from ..workflows import CheckpointStore
    from .as_agent import TeamAgent

__all__ = ["Team"]


class Team(ABC):
    """A team definition. Subclasses build their workflow in `_build_workflow`.

    `channels` maps a thread kind to the factory of its channel, for agents whose threads
    are neither local nor service threads. `sync_timeout` bounds how long a participant
    waits for its channel to catch up. `guardrails` (``on="turn"``) check each turn's
    message before it joins the shared history: a replacement is what the others see, a
    tripwire stops the run cleanly, its `TaskResult.stop_message` naming the guardrail
    (source ``"guardrail:<name>"``) and saying why.
    """

    def __init__(
        self,
        participants: Sequence[Agent],
        *,
        name: str = "team",
        description: str = "",
        channels: Mapping[type[AgentThread], ChannelFactory] | None = None,
        sync_timeout: float = 60.0,
        guardrails: Iterable[Guardrail] = (),
    ) -> None:
        if not isinstance(name, str) or not name:
            raise ConfigurationError(f"a team needs a non-empty name, got {name!r}")
        agents = list(participants)
        if not agents:
            raise ConfigurationError(f"team {name!r} needs at least one participant")
        seen: set[str] = set()
        for agent in agents:
            if not isinstance(agent, Agent):
                raise ConfigurationError(
                    f"team {name!r}: participant {agent!r} is not an Agent; wrap plain "
                    "functions in an Agent subclass or use a workflow"
                )
            if agent.name in seen:
                raise ConfigurationError(
                    f"team {name!r} has two participants named {agent.name!r}; names pick "
                    "the speaker, so give each a unique name"
                )
            seen.add(agent.name)
        if sync_timeout <= 0:
            raise ConfigurationError(f"sync_timeout must be positive, got {sync_timeout!r}")
        self.name = name
        self.description = description
        self._participants = tuple(agents)
        self._factories = factories_for(agents, channels)
        self._sync_timeout = sync_timeout
        self.guardrails = turn_guardrails(guardrails, team=name)
        """What checks each turn's message (see `turn_guardrails`)."""
        self._workflow: Workflow | None = None
        self._placed: Workflow | None = None
        self._session: TeamSession | None = None

    @property
    def participants(self) -> tuple[Agent, ...]:
        """The team's agents, in order."""
        return self._participants

    @property
    def participant_names(self) -> list[str]:
        """The participants' names, in order."""
        return [a.name for a in self._participants]

    # -- the workflow -----------------------------------------------------------------------

    @property
    def workflow(self) -> Workflow:
        """The workflow this team runs as (built once, shared by every session)."""
        if self._workflow is None:
            workflow = self._build_workflow()
            for executor in workflow.executors.values():
                if isinstance(executor, ParticipantExecutor | TeamManager):
                    executor.channel_factories = self._factories
                    executor.sync_timeout = self._sync_timeout
            self._workflow = workflow
        return self._workflow

    def workflow_for(self, runtime: AgentRuntime | None) -> Workflow:
        """The workflow to run on `runtime`: `workflow` itself, or on a runtime that copies
        messages (Ray, a serializing `LocalRuntime`) the same graph with each executor on
        an actor of its own (``placement="executor"``), since a run's actor could not be
        copied. Both are wired alike, so a checkpoint of one resumes on the other."""
        base = self.workflow
        if runtime is None or not _copies_messages(runtime) or base.placement == "executor":
            return base
        if self._placed is None:
            self._placed = Workflow(
                executors=dict(base.executors),
                groups=base.edge_groups,
                start_id=base.start_id,
                name=base.name,
                description=base.description,
                max_supersteps=base.max_supersteps,
                checkpoint_store=base.checkpoint_store,
                placement="executor",
                output_from=base.output_from,
                event_timeout=base.event_timeout,
            )
        return self._placed

    @abstractmethod
    def _build_workflow(self) -> Workflow:
        """Build the team's workflow; its start executor takes a `TeamTask`."""

    def _star_workflow(
        self,
        manager: TeamManager,
        *,
        participants: Sequence[Executor] | None = None,
        max_supersteps: int = 10_000,
    ) -> Workflow:
        """The usual shape: the manager, and an edge to and from each participant."""
        manager.guardrails = self.guardrails
        executors = list(participants or [ParticipantExecutor(a) for a in self._participants])
        builder = WorkflowBuilder(
            manager, name=self.name, description=self.description, max_supersteps=max_supersteps
        )
        for ex in executors:
            builder.add_edge(manager, ex)
            builder.add_edge(ex, manager)
        return builder.build()

    def _new_channels(self, *, copying: bool = False) -> TeamChannels[Any]:
        """A session's channels: broadcast in process, replicated from the run's log on a
        runtime that copies messages (the one place the kind is chosen)."""
        if copying:
            return ReplicatedChannels(self._factories, sync_timeout=self._sync_timeout)
        return ChannelSet(self._factories, sync_timeout=self._sync_timeout)

    # -- sessions ---------------------------------------------------------------------------

    def create_session(
        self,
        *,
        checkpoint_store: CheckpointStore | None = None,
        runtime: AgentRuntime | None = None,
    ) -> TeamSession:
        """A new, independent conversation with this team."""
        return TeamSession(self, checkpoint_store=checkpoint_store, runtime=runtime)

    async def resume(
        self,
        checkpoint_id: str | None = None,
        *,
        checkpoint_store: CheckpointStore | None = None,
        runtime: AgentRuntime | None = None,
    ) -> TeamSession:
        """The conversation saved at `checkpoint_id` in `checkpoint_store`, in a new session
        of this process (`run()` goes on); or, with no checkpoint, AutoGen's ``resume()``:
        the paused default session goes on (see `TeamSession.resume`). Returns the session
        that goes on."""
        if checkpoint_id is None:
            if checkpoint_store is not None or runtime is not None:
                raise UsageError(
                    f"team {self.name!r}: resume() without a checkpoint id resumes the paused "
                    "default session; pass checkpoint_id= to resume a checkpoint"
                )
            await self.session.resume()
            return self.session
        if checkpoint_store is None:
            raise UsageError(
                f"team {self.name!r}: resuming checkpoint {checkpoint_id!r} needs the "
                "checkpoint_store= it was saved in"
            )
        session = self.create_session(checkpoint_store=checkpoint_store, runtime=runtime)
        await session._restore(checkpoint_id)
        return session

    @property
    def session(self) -> TeamSession:
        """The default session that `run`, `run_stream`, `reset` and the state methods use.

        Like any session without a store it writes no checkpoint as it runs (so
        ``team.run()`` costs what ``create_session().run()`` does), and `save_state` saves
        it when asked, as AutoGen's does; `use_checkpoint_store` makes it checkpoint every
        step into a store."""
        if self._session is None:
            self._session = self.create_session()
        return self._session

    async def run(
        self,
        task: TaskInput = None,
        *,
        cancellation_token: CancellationToken | None = None,
        include_routing: bool = False,
    ) -> TaskResult:
        """Run the default session on `task` (None continues); see `TeamSession.run`."""
        return await self.session.run(
            task, cancellation_token=cancellation_token, include_routing=include_routing
        )

    def run_stream(
        self,
        task: TaskInput = None,
        *,
        cancellation_token: CancellationToken | None = None,
        include_routing: bool = False,
    ) -> AsyncIterator[StreamItem]:
        """Stream a run of the default session; see `TeamSession.run_stream`."""
        return self.session.run_stream(
            task, cancellation_token=cancellation_token, include_routing=include_routing
        )

    async def pause(self) -> None:
        """Pause the default session's run; see `TeamSession.pause` (`resume()` goes on)."""
        await self.session.pause()

    def stop(self) -> None:
        """Stop the default session's run after its turn under way; see `TeamSession.stop`."""
        self.session.stop()

    async def reset(self) -> None:
        """Reset the default session."""
        await self.session.reset()

    async def save_state(self) -> dict[str, Any]:
        """The default session's state as JSON."""
        return await self.session.save_state()

    async def load_state(self, state: Mapping[str, Any]) -> None:
        """Load a saved state into the default session."""
        await self.session.load_state(state)

    def use_checkpoint_store(self, store: CheckpointStore) -> TeamSession:
        """Make the default session a new one that checkpoints into `store`."""
        self._session = self.create_session(checkpoint_store=store)
        return self._session

    async def close(self) -> None:
        """Stop the default session's background deliveries (its conversation is kept)."""
        if self._session is not None:
            await self._session.close()

    # -- as an agent ------------------------------------------------------------------------

    def as_agent(self, *, name: str | None = None, description: str | None = None) -> TeamAgent:
        """This team as an `Agent`: each run is a team run on the thread's conversation."""
        from .as_agent import TeamAgent

        return TeamAgent(self, name=name, description=description)

    def as_mcp_server(self, *, name: str = "cantata", call_timeout: float | None = 300.0) -> Any:
        """This team as an MCP server, one tool per served run: the same server as
        ``cantata.serve.as_mcp_server(team)``, which this calls. The serving layer sits
        above this one, so the `cantata` package registers it (`cantata.core._serving`)."""
        return mcp_server(self, kind="team", name=name, call_timeout=call_timeout)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, participants={self.participant_names})"
