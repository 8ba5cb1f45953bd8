"""`AgentRuntime`: the contract every runtime implements (in-process, Ray).

Kept free of in-process assumptions: messages are values (they may be copied across a
process boundary), agents are created by the runtime from factories registered by type,
and every call is async so a remote runtime can implement it.

The one thing that stays in the caller's process is a local subscriber: a callback that
receives a topic's events (and answers direct requests to its address) where it was added,
so a driver can listen to actors that run elsewhere (a workflow run's events and journal).
`_LocalSubscribers` is its in-process implementation, made of the contract's own calls.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeAlias, runtime_checkable

from ..core import CancellationToken, ConfigurationError, new_id, register
from ..stores import StateStore
from .agent import BaseAgent
from .ids import AgentId, TopicId
from .subscriptions import Subscription

__all__ = [
    "LOCAL_TYPE",
    "AgentFactory",
    "AgentRuntime",
    "LocalCallback",
    "LocalSubscriber",
    "LocalTopicSubscription",
]

AgentFactory: TypeAlias = Callable[[], BaseAgent | Awaitable[BaseAgent]]
"""Makes one agent instance; called on the first message to each new `AgentId`."""

LocalCallback: TypeAlias = Callable[[Any], Any]
"""Takes an event or a direct request (sync or async); what it returns answers a request."""

LOCAL_TYPE = "cantata.local"
"""The agent type of local subscribers' addresses (reserved: no factory may take it)."""


@dataclass(frozen=True, slots=True)
class LocalSubscriber:
    """A callback living in the process that added it, reachable from every process.

    Events published to `topic_id` reach it; so do direct requests sent to `agent_id`
    (answered with the callback's return value). One message at a time, in arrival order.
    """

    id: str
    """The id of its subscription."""
    agent_id: AgentId
    """Its address: `send_message(..., agent_id)` from any process calls the callback here."""
    topic_id: TopicId


@register(name="cantata.runtime.LocalTopicSubscription")
@dataclass(frozen=True, slots=True)
class LocalTopicSubscription:
    """Routes exactly one topic (type and source) to one local subscriber's address."""

    topic_type: str
    source: str
    key: str
    """The key of the local subscriber's `AgentId` (its type is `LOCAL_TYPE`)."""
    id: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if not self.id:
            object.__setattr__(
                self, "id", f"local:{self.topic_type}/{self.source}->{LOCAL_TYPE}/{self.key}"
            )

    @property
    def by_topic_type(self) -> bool:
        """False: the match depends on the topic's source too."""
        return False

    def is_match(self, topic_id: TopicId) -> bool:
        """True for this one topic."""
        return topic_id[1] == self.source and topic_id[0] == self.topic_type

    def map_to_agent(self, topic_id: TopicId) -> AgentId:
        """The local subscriber's address."""
        return AgentId(LOCAL_TYPE, self.key)


@runtime_checkable
class AgentRuntime(Protocol):
    """Delivers direct requests and broadcast events to agents, one message at a time per
    `AgentId`, and manages their lifecycle and state."""

    async def register_factory(
        self,
        agent_type: str,
        factory: AgentFactory,
        *,
        agent_class: type[BaseAgent] | None = None,
    ) -> None:
        """Register how to create agents of `agent_type` (and the class's default
        subscriptions)."""
        ...

    async def send_message(
        self,
        message: Any,
        recipient: AgentId,
        *,
        sender: AgentId | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 (the fixed API; wraps a timer)
        cancellation_token: CancellationToken | None = None,
        message_id: str | None = None,
    ) -> Any:
        """Deliver a direct request and return the handler's result (or raise its error)."""
        ...

    async def publish_message(
        self,
        message: Any,
        topic_id: TopicId,
        *,
        sender: AgentId | None = None,
        message_id: str | None = None,
    ) -> None:
        """Deliver an event to every subscriber of `topic_id` except the sender."""
        ...

    async def add_subscription(self, subscription: Subscription) -> None:
        """Start routing matching topics to the subscription's agent."""
        ...

    async def add_local_subscriber(
        self, topic_id: TopicId, callback: LocalCallback
    ) -> LocalSubscriber:
        """Call `callback` in this process for each event on `topic_id` (published from any
        process) and for each direct request to the returned subscriber's `agent_id`."""
        ...

    async def remove_local_subscriber(self, subscriber: LocalSubscriber) -> None:
        """Stop calling the subscriber's callback; requests to it are refused from now on."""
        ...

    async def remove_subscription(self, subscription_id: str) -> None:
        """Stop routing for the subscription with this id."""
        ...

    async def release_agents(self, agent_ids: Iterable[AgentId]) -> int:
        """Take these agents out of memory for good (their work is over): nothing is saved,
        their stored records are deleted, a later message creates them afresh; a busy one
        leaves once idle. How many left memory at once."""
        ...

    async def start(self) -> None:
        """Start taking messages."""
        ...

    async def stop(self) -> None:
        """Stop taking messages, let handlers in flight finish, then cancel the rest."""
        ...

    async def wait_until_idle(self) -> None:
        """Wait until no message is queued or being handled; keep running. Bounded (in
        `LocalRuntime` by its `default_timeout`, or a `timeout=`): `TimeoutError` past it."""
        ...

    async def stop_when_idle(self) -> None:
        """Wait until no message is queued or being handled, then stop."""
        ...

    async def stop_when(self, predicate: Callable[[], bool]) -> None:
        """Stop once `predicate()` is true (checked after each handled message); bounded
        like `wait_until_idle`."""
        ...

    async def close(self) -> None:
        """Stop, and run every agent's close hook."""
        ...

    async def save_state(self, store: StateStore | None = None) -> dict[str, Any]:
        """The state of agents and subscriptions as JSON data (also written to `store`)."""
        ...

    async def load_state(self, source: StateStore | Mapping[str, Any]) -> None:
        """Restore what `save_state` wrote."""
        ...


class _Endpoint(BaseAgent):
    """The agent behind an in-process local subscriber: it calls the callback."""

    __slots__ = ("_callback",)

    def __init__(self, callback: LocalCallback) -> None:
        self._callback = callback

    async def on_message(self, message: Any, ctx: Any) -> Any:
        """Call the callback with `message`; its (awaited) value is the answer."""
        result = self._callback(message)
        if inspect.isawaitable(result):
            result = await result
        return result


async def local_subscribe(
    runtime: Any, topic_id: TopicId, callback: LocalCallback
) -> LocalSubscriber:
    """A local subscriber on an in-process runtime: an instance agent and a subscription."""
    if not isinstance(topic_id, TopicId):
        raise ConfigurationError(f"topic {topic_id!r} is not a TopicId: use TopicId(type, source)")
    if not callable(callback):
        raise ConfigurationError(f"the local subscriber of {topic_id} is not callable")
    agent_id = AgentId(LOCAL_TYPE, new_id())
    await runtime.register_instance(_Endpoint(callback), agent_id)
    subscription = LocalTopicSubscription(topic_id[0], topic_id[1], agent_id.key)
    await runtime.add_subscription(subscription)
    return LocalSubscriber(subscription.id, agent_id, topic_id)


async def local_unsubscribe(runtime: Any, subscriber: LocalSubscriber) -> None:
    """Remove what `local_subscribe` added (the instance leaves the runtime's agents)."""
    await runtime.remove_subscription(subscriber.id)
    runtime._cells.pop(subscriber.agent_id, None)


class _LocalSubscribers:
    """`add_local_subscriber` for a runtime whose agents all live in this process."""

    __slots__ = ()

    async def add_local_subscriber(
        self, topic_id: TopicId, callback: LocalCallback
    ) -> LocalSubscriber:
        """Call `callback` for each event on `topic_id` and each direct request to the
        returned subscriber's `agent_id` (an agent instance of this runtime)."""
        return await local_subscribe(self, topic_id, callback)

    async def remove_local_subscriber(self, subscriber: LocalSubscriber) -> None:
        """Stop calling the subscriber's callback."""
        await local_unsubscribe(self, subscriber)
