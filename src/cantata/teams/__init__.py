"""cantata.teams: teams of agents, built on workflows.

Every team is a workflow: a manager executor (speaker policy, termination, routing log)
and one executor per participant, passing a turn token. So a team streams, checkpoints,
resumes in a fresh process, runs many conversations at once from one definition, and
nests as an agent (`team.as_agent()`).
"""

from .actor import AgentActor, AgentReply, AgentTask, register_agent
from .as_agent import TeamAgent
from .channels import (
    AgentChannel,
    ChannelFactory,
    ChannelSet,
    ChannelSyncError,
    LocalChannel,
    ServiceChannel,
    channel_key,
)
from .events import RoutingEvent, TeamEvent, TeamMessageEvent, TeamStoppedEvent
from .group_chat import GroupChat, GroupChatManager
from .manager import MANAGER_ID, ManagerState, TeamManager
from .participant import ParticipantExecutor
from .result import StopMessage, TaskResult
from .session import STATE_SCHEMA_VERSION, TaskInput, TeamBusyError, TeamSession
from .speakers import (
    DEFAULT_SELECTOR_PROMPT,
    ChatState,
    FunctionPolicy,
    RoundRobin,
    Selector,
    SpeakerChoice,
    SpeakerFunction,
    SpeakerPolicy,
)
from .team import Team
from .termination import (
    AndTermination,
    External,
    Functional,
    FunctionCall,
    Handoff,
    MaxMessage,
    Observation,
    OrTermination,
    SourceMatch,
    TerminationCondition,
    TextMention,
    Timeout,
    TokenUsage,
)
from .turns import AwaitingTask, SpeakTurn, TeamTask, TurnDone

__all__ = [
    "DEFAULT_SELECTOR_PROMPT",
    "MANAGER_ID",
    "STATE_SCHEMA_VERSION",
    "AgentActor",
    "AgentChannel",
    "AgentReply",
    "AgentTask",
    "AndTermination",
    "AwaitingTask",
    "ChannelFactory",
    "ChannelSet",
    "ChannelSyncError",
    "ChatState",
    "External",
    "FunctionCall",
    "FunctionPolicy",
    "Functional",
    "GroupChat",
    "GroupChatManager",
    "Handoff",
    "LocalChannel",
    "ManagerState",
    "MaxMessage",
    "Observation",
    "OrTermination",
    "ParticipantExecutor",
    "RoundRobin",
    "RoutingEvent",
    "Selector",
    "ServiceChannel",
    "SourceMatch",
    "SpeakTurn",
    "SpeakerChoice",
    "SpeakerFunction",
    "SpeakerPolicy",
    "StopMessage",
    "TaskInput",
    "TaskResult",
    "Team",
    "TeamAgent",
    "TeamBusyError",
    "TeamEvent",
    "TeamManager",
    "TeamMessageEvent",
    "TeamSession",
    "TeamStoppedEvent",
    "TeamTask",
    "TerminationCondition",
    "TextMention",
    "Timeout",
    "TokenUsage",
    "TurnDone",
    "channel_key",
    "register_agent",
]
