"""cantata.runtime: the actor runtime that agents, workflows and teams run on.

Agents are addressed by `AgentId(type, key)` and created lazily from factories; messages
go directly (`send_message`, with a result) or by topic (`publish_message`, to every
subscriber). Each agent handles one message at a time. `LocalRuntime` runs all of it in
one process; every runtime implements the `AgentRuntime` protocol.
"""

from .agent import BaseAgent, RoutedAgent
from .closure import Closure, ClosureAgent, register_closure
from .context import MessageContext, current_context
from .events import (
    AgentActivated,
    AgentEvicted,
    AgentReleased,
    DeliveryFailed,
    MessageWasDropped,
    RuntimeEvent,
)
from .handlers import HandlerKind, Match, event, message_handler, rpc
from .ids import AgentId, TopicId
from .interventions import DROP, DropMessage, InterventionHandler
from .lifecycle import DEFAULT_TIMEOUT
from .local import LocalRuntime
from .protocol import AgentFactory, AgentRuntime
from .state import SCHEMA_VERSION
from .subscriptions import (
    Subscription,
    TypePrefixSubscription,
    TypeSubscription,
    default_subscriptions,
    type_prefix_subscription,
    type_subscription,
)

__all__ = [
    "DEFAULT_TIMEOUT",
    "DROP",
    "SCHEMA_VERSION",
    "AgentActivated",
    "AgentEvicted",
    "AgentFactory",
    "AgentId",
    "AgentReleased",
    "AgentRuntime",
    "BaseAgent",
    "Closure",
    "ClosureAgent",
    "DeliveryFailed",
    "DropMessage",
    "HandlerKind",
    "InterventionHandler",
    "LocalRuntime",
    "Match",
    "MessageContext",
    "MessageWasDropped",
    "RoutedAgent",
    "RuntimeEvent",
    "Subscription",
    "TopicId",
    "TypePrefixSubscription",
    "TypeSubscription",
    "current_context",
    "default_subscriptions",
    "event",
    "message_handler",
    "register_closure",
    "rpc",
    "type_prefix_subscription",
    "type_subscription",
]
