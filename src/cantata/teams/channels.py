"""Channels: one shared history mirrored into threads of different kinds.

A group chat keeps one authoritative history. Participants whose agents use the same kind
of thread share one channel (not one per agent): the channel mirrors the history into that
kind of thread. A local channel keeps the mirror here and shows each local agent the
conversation from its own side; a service channel holds one server-side thread and hands it
what it has not seen yet.

The channels of one conversation sit behind one interface, `TeamChannels`, which the
session chooses once and every executor reaches through `channels_of`: `ChannelSet` (in
`broadcast.py`) broadcasts in process; `ReplicatedChannels` (in `replication.py`) serves a
runtime that copies messages (Ray, or a `LocalRuntime` that serializes them), where the
participants run in other processes and each channel catches up from the run's history
log when it is read. Messages are trimmed to the contents a channel takes (`admit`), and
a message left with none is not forwarded.
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Protocol, TypedDict, TypeVar, Unpack

from ..agents import Agent, AgentResponse, AgentResponseUpdate, AgentThread, LocalThread
from ..agents import ServiceThread as _ServiceThread
from ..core import (
    CancellationToken,
    ConfigurationError,
    Content,
    DataContent,
    FunctionCallContent,
    FunctionResultContent,
    Message,
    RunError,
    TextContent,
    TimeoutError,
)
from ..models import ChatOptions

if TYPE_CHECKING:
    from ..workflows import WorkflowContext

__all__ = [
    "AgentChannel",
    "ChannelFactory",
    "ChannelSyncError",
    "LocalChannel",
    "ServiceChannel",
    "TeamChannels",
    "TurnOptions",
    "channel_key",
    "default_channel_factory",
    "factories_for",
    "sourced",
]

UpdateSink = Callable[[AgentResponseUpdate], None]


class TurnOptions(TypedDict, total=False):
    """How one turn of an agent runs on a channel, written once for every channel's
    `invoke` and `continue_turn`: `options` laid over the agent's own for this run only,
    `on_update` to stream its chunks, `cancellation_token` to stop it."""

    options: ChatOptions | None
    on_update: UpdateSink | None
    cancellation_token: CancellationToken | None


class ChannelSyncError(RunError):
    """A message could not be delivered to a channel; raised when that channel is next read.

    The undelivered messages stay queued and are delivered again at the next sync."""


class AgentChannel(ABC):
    """One mirror of the group's history for every participant of one thread kind."""

    accepted_contents: ClassVar[tuple[type, ...]] = (TextContent, DataContent)
    """Content types this channel takes; other contents are trimmed before delivery."""

    def __init__(self, key: str) -> None:
        self.key = key

    def admit(self, message: Message) -> Message | None:
        """The message trimmed to the contents this channel takes, or None if none remain."""
        kept = [c for c in message.contents if isinstance(c, self.accepted_contents)]
        if len(kept) == len(message.contents):
            return message
        if not kept:
            return None
        return message.copy(contents=kept)

    @abstractmethod
    async def receive(self, messages: Sequence[tuple[str, Message]]) -> None:
        """Take new history messages, each with its source (a participant, or "user")."""

    def receive_nowait(self, messages: Sequence[tuple[str, Message]]) -> bool:
        """Take messages at once if that cannot block or fail (a list in memory, say);
        False (the default) sends them through the background delivery instead."""
        return False

    @abstractmethod
    async def invoke(self, agent: Agent, **turn: Unpack[TurnOptions]) -> AgentResponse:
        """Run `agent` on this channel's view of the history, with `options` for this run
        only (laid over the agent's own, as ``agent.run(options=...)`` does); the channel
        keeps the reply."""

    async def paused(self, agent: Agent) -> dict[str, Any] | None:
        """`agent`'s turn on this channel paused for a person: what the channel needs to go
        on with it after a resume, as JSON (kept in the checkpoint), or None (the default:
        the turn's messages are enough)."""
        return None

    async def continue_turn(
        self,
        agent: Agent,
        said: Sequence[Message],
        answers: Sequence[Message],
        *,
        saved: dict[str, Any] | None = None,
        **turn: Unpack[TurnOptions],
    ) -> AgentResponse:
        """Go on with `agent`'s turn that paused for a person: it had said `said` (its
        requests last), and `answers` are the person's answers; run it on them as `invoke`
        runs it (the channel keeps the reply). A channel made since the turn paused (a
        resume) holds none of `said`: it takes it first, or what `paused` returned
        (`saved`). A channel kind that cannot go on with a turn refuses (the default)."""
        raise ConfigurationError(
            f"participant {agent.name!r} waits for a person's answer on a channel of kind "
            f"{type(self).__name__}, which cannot go on with a paused turn; implement "
            "AgentChannel.continue_turn for it"
        )

    @abstractmethod
    async def reset(self) -> None:
        """Forget everything (the history was reduced; the reduced one follows)."""


def _call(
    agent: Agent, messages: list[Message] | None, thread: AgentThread, turn: TurnOptions
) -> Awaitable[AgentResponse]:
    """The agent's run for one turn: its own `run` as it is (a plain function, so a turn
    that does not stream makes no coroutine of its own here), or a streamed run."""
    options, token = turn.get("options"), turn.get("cancellation_token")
    on_update = turn.get("on_update")
    if on_update is None:
        return agent.run(messages, thread=thread, options=options, cancellation_token=token)
    return _streamed(agent, messages, thread, options, token, on_update)


async def _streamed(
    agent: Agent,
    messages: list[Message] | None,
    thread: AgentThread,
    options: ChatOptions | None,
    token: CancellationToken | None,
    on_update: UpdateSink,
) -> AgentResponse:
    stream = agent.run_stream(messages, thread=thread, options=options, cancellation_token=token)
    async for update in stream:
        on_update(update)
    return stream.response


class LocalChannel(AgentChannel):
    """The channel of agents on local threads: the mirror is a list kept here.

    Each agent sees the conversation from its side: its own messages as they are, other
    participants' replies as user messages carrying their text (a model reads those as
    input, not as something it said), tool traffic of others left out. Each agent keeps
    one thread on the channel, handed only what is new at each turn, so a turn costs what
    changed, not the length of the conversation.
    """

    accepted_contents = (TextContent, DataContent, FunctionCallContent, FunctionResultContent)

    def __init__(self, key: str) -> None:
        super().__init__(key)
        self._mirror: list[tuple[str, Message]] = []
        self._threads: dict[str, AgentThread] = {}
        self._seen: dict[str, int] = {}
        self._inputs: dict[str, Message | None] = {}

    async def receive(self, messages: Sequence[tuple[str, Message]]) -> None:
        self._mirror.extend(messages)

    def receive_nowait(self, messages: Sequence[tuple[str, Message]]) -> bool:
        self._mirror.extend(messages)
        return True

    def view(self, name: str) -> list[Message]:
        """The whole conversation as the participant `name` reads it."""
        return _side_of(name, self._mirror, self._inputs)

    async def invoke(self, agent: Agent, **turn: Unpack[TurnOptions]) -> AgentResponse:
        name = agent.name
        thread = self._threads.get(name)
        if thread is None:
            thread = self._threads[name] = agent.create_thread()
        new = _side_of(name, self._mirror[self._seen.get(name, 0) :], self._inputs)
        if new:
            await thread.on_new_message(new)
        self._seen[name] = len(self._mirror)  # delivered, even if the run is cancelled
        response = await _call(agent, None, thread, turn)
        mirror = self._mirror
        mirror.extend([(name, m) for m in response.messages])
        self._seen[name] = len(mirror)  # its own reply is in its thread already
        return response

    async def continue_turn(
        self,
        agent: Agent,
        said: Sequence[Message],
        answers: Sequence[Message],
        *,
        saved: dict[str, Any] | None = None,
        **turn: Unpack[TurnOptions],
    ) -> AgentResponse:
        # Answers go to the agent's thread only: a person's approval must not reach another
        # agent's thread as a user message. What the agent said itself is in the mirror
        # (for the text others read), unless the channel was made since the turn paused
        # (a resume): then the thread takes the turn so far, in order, and the mirror its
        # own messages.
        name = agent.name
        mirror = self._mirror
        first = said[0].message_id if said else None  # what its run said first, before any answer
        made_since = first is not None and not any(
            m.message_id == first for source, m in reversed(mirror) if source == name
        )
        thread = self._threads.get(name)
        if thread is None:
            thread = self._threads[name] = agent.create_thread()
        new = _side_of(name, mirror[self._seen.get(name, 0) :], self._inputs)
        await thread.on_new_message([*new, *(said if made_since else ()), *answers])
        if made_since:
            mirror.extend([(name, m) for m in said if m.role != "user"])
        self._seen[name] = len(mirror)
        response = await _call(agent, None, thread, turn)
        mirror.extend([(name, m) for m in response.messages])
        self._seen[name] = len(mirror)
        return response

    async def reset(self) -> None:
        threads, self._threads = self._threads, {}
        for thread in threads.values():
            await thread.delete()
        self._mirror = []
        self._seen = {}
        self._inputs = {}

    def __len__(self) -> int:
        return len(self._mirror)


def _side_of(
    name: str, mirrored: Sequence[tuple[str, Message]], inputs: dict[str, Message | None]
) -> list[Message]:
    """Messages as participant `name` reads them (see `LocalChannel`); `inputs` remembers
    other participants' messages made input, so each is made once, whoever reads it."""
    out: list[Message] = []
    for source, m in mirrored:
        if source == name or m.role in ("user", "system"):
            out.append(m)
            continue
        key = m.message_id
        if key in inputs:
            seen = inputs[key]
        else:
            kept: list[Content] = [c for c in m.contents if type(c) in (TextContent, DataContent)]
            seen = (
                Message("user", kept, author_name=m.author_name or source, message_id=key)
                if kept
                else None
            )
            inputs[key] = seen
        if seen is not None:
            out.append(seen)
    return out


class ServiceChannel(AgentChannel):
    """The channel of agents whose thread lives on a server: one server thread for them all.

    A thread kind that sends new messages to its server in `on_new_message` (it overrides
    `ServiceThread._on_new_messages`) gets the history as it is broadcast, so a server that
    refuses it fails the delivery, which is raised at the next sync. A thread kind that
    leaves the recording to the service as it answers (the base class's behaviour) gets
    what it has not seen as the input of the next agent run on it.
    """

    def __init__(self, key: str, agent: Agent) -> None:
        super().__init__(key)
        self._first = agent
        self._thread: AgentThread | None = None
        self._unsent: list[Message] = []
        self._replied: list[Message] = []
        """The last reply run on the thread (a turn that paused has it there already)."""

    @property
    def thread(self) -> AgentThread:
        """The shared server-side thread (made on first use)."""
        if self._thread is None:
            self._thread = self._first.create_thread()
        return self._thread

    @property
    def pushes(self) -> bool:
        """Whether the thread kind sends new messages to its server itself."""
        method = type(self.thread)._on_new_messages
        return method is not _ServiceThread._on_new_messages

    async def receive(self, messages: Sequence[tuple[str, Message]]) -> None:
        if not messages:
            return
        batch = [m for _, m in messages]
        if self.pushes:
            await self.thread.on_new_message(batch)
        else:
            self._unsent.extend(batch)

    async def invoke(self, agent: Agent, **turn: Unpack[TurnOptions]) -> AgentResponse:
        unsent, self._unsent = self._unsent, []
        try:
            response = await _call(agent, unsent or None, self.thread, turn)
        except BaseException:
            self._unsent = unsent + self._unsent  # not delivered: keep it for the next run
            raise
        self._replied = response.messages
        return response

    async def continue_turn(
        self,
        agent: Agent,
        said: Sequence[Message],
        answers: Sequence[Message],
        *,
        saved: dict[str, Any] | None = None,
        **turn: Unpack[TurnOptions],
    ) -> AgentResponse:
        # the server thread holds the turn so far if this channel ran it; a channel made
        # since (a resume) takes that thread back from `saved` (it holds the history up to
        # the pause, so nothing is unsent), or else sends the turn along with the history
        last = said[-1].message_id if said else None  # said by the run that paused last
        held: list[Message] = []
        if not any(m.message_id == last for m in self._replied):
            if saved is not None:
                self._thread = await agent.deserialize_thread(saved)
                self._unsent = []
            else:
                held = list(said)
        unsent, self._unsent = self._unsent, []
        try:
            response = await _call(agent, [*unsent, *held, *answers], self.thread, turn)
        except BaseException:
            self._unsent = unsent + self._unsent
            raise
        self._replied = response.messages
        return response

    async def paused(self, agent: Agent) -> dict[str, Any] | None:
        return await self.thread.serialize()

    async def reset(self) -> None:
        old, self._thread = self._thread, None
        self._unsent = []
        self._replied = []
        if old is not None:
            await old.delete()


ChannelFactory = Callable[[str, Agent], AgentChannel]
"""Makes the channel for a thread kind, given its key and the first agent of that kind."""


def channel_key(agent: Agent) -> str:
    """The key of the channel an agent uses: its thread kind's qualified class name."""
    cls = agent.thread_type
    return f"{cls.__module__}.{cls.__qualname__}"


def _local_channel(key: str, _agent: Agent) -> AgentChannel:
    """The local thread kinds' factory (a module function: it pickles by reference)."""
    return LocalChannel(key)


def default_channel_factory(agent: Agent) -> ChannelFactory | None:
    """The built-in channel for an agent's thread kind (local or service), or None."""
    if issubclass(agent.thread_type, LocalThread):
        return _local_channel
    if issubclass(agent.thread_type, _ServiceThread):
        return ServiceChannel
    return None


def factories_for(
    agents: Sequence[Agent], custom: Mapping[type[AgentThread], ChannelFactory] | None = None
) -> dict[str, ChannelFactory]:
    """The channel factory of every thread kind among `agents`; refuses a kind with none."""
    out: dict[str, ChannelFactory] = {}
    for agent in agents:
        key = channel_key(agent)
        if key in out:
            continue
        factory = (custom or {}).get(agent.thread_type) or default_channel_factory(agent)
        if factory is None:
            raise ConfigurationError(
                f"participant {agent.name!r} is an agent of kind {type(agent).__name__} whose "
                f"threads are {agent.thread_type.__name__}, a kind no channel serves; pass "
                f"channels={{{agent.thread_type.__name__}: make_channel}} to the team, or "
                "give the agent a LocalThread or ServiceThread subclass"
            )
        out[key] = factory
    return out


class _Held(Protocol):
    channel: AgentChannel


HeldT = TypeVar("HeldT", bound=_Held)


class TeamChannels(Generic[HeldT]):
    """The channels of one conversation, as a team's executors reach them (`channels_of`).

    Two implementations, one chosen by the session for the whole conversation:
    `ChannelSet` (in process: new messages are broadcast to the channels) and
    `ReplicatedChannels` (a runtime that copies messages: each channel catches up from the
    run's history log when it is read). A participant asks `ready` (no wait needed) and
    else `read`, then says what its turn `wrote`; the manager `publish`es what joined the
    history, and passes a reduction on (`apply_reduction`). A plain base class, not an
    ABC: the accessor's isinstance test runs at every turn.
    """

    def __init__(self, factories: Mapping[str, ChannelFactory], *, sync_timeout: float) -> None:
        self._factories = dict(factories)
        self._entries: dict[str, HeldT] = {}
        self.sync_timeout = sync_timeout

    @property
    def keys(self) -> list[str]:
        """Keys of the channels made so far."""
        return list(self._entries)

    def channel(self, key: str) -> AgentChannel | None:
        """The channel with this key, if it was made."""
        entry = self._entries.get(key)
        return None if entry is None else entry.channel

    def ready(self, key: str) -> AgentChannel | None:
        """The channel `key` if reading it needs no wait (else None: `read` it)."""
        return None

    async def read(self, key: str, agent: Agent, ctx: WorkflowContext[Any, Any]) -> AgentChannel:
        """The channel `key`, up to date with the run's history for `agent`'s turn (made
        first if needed); raises `ChannelSyncError` for a delivery that failed."""
        raise NotImplementedError

    keeps_writes: ClassVar[bool] = False
    """Whether `wrote` does anything (a participant skips the call when not)."""

    def wrote(self, key: str, messages: Sequence[Message]) -> None:
        """Messages written on channel `key` (an agent's reply), which the history will
        hold too. Nothing by default."""

    def publish(self, messages: Sequence[Message], *, exclude: str = "") -> None:
        """Messages joined the history (written on channel `exclude`, or by nobody's
        channel). Nothing by default."""

    async def apply_reduction(
        self, reduced: Sequence[Message], ctx: WorkflowContext[Any, Any]
    ) -> None:
        """The history was reduced to `reduced`: every channel mirrors that from now on."""
        raise NotImplementedError

    async def close(self) -> None:
        """Stop what is under way and forget every channel."""
        self._entries.clear()

    def _make(self, key: str, agent: Agent) -> AgentChannel:
        factory = self._factories.get(key)
        if factory is None:
            raise ConfigurationError(
                f"participant {agent.name!r} needs a channel for threads of kind {key!r}, "
                f"and this team has none; its channels serve {sorted(self._factories)}"
            )
        return factory(key, agent)


def sourced(messages: Sequence[Message]) -> list[tuple[str, Message]]:
    """Messages with their source, as channels take them."""
    return [(m.author_name or m.role, m) for m in messages]


def _late(key: str, agent: Agent, sync_timeout: float) -> TimeoutError:
    """The error of a channel that did not catch up in time for its participant's turn."""
    return TimeoutError(
        f"channel {key!r} did not catch up within {sync_timeout:g}s before "
        f"participant {agent.name!r} could read it; raise sync_timeout or look at "
        "why its thread is slow to take messages"
    )


_ELSEWHERE = {
    "ChannelSet": "cantata.teams.broadcast",
    "REDUCED_LOG": "cantata.teams.replication",
    "Reduction": "cantata.teams.replication",
    "ReplicatedChannels": "cantata.teams.replication",
    "channels_for": "cantata.teams.replication",
    "register_channels": "cantata.teams.replication",
}
"""Names this module has always offered whose code lives with its implementation (they
import this module, so they resolve on first use)."""


def __getattr__(name: str) -> Any:
    home = _ELSEWHERE.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(home), name)
