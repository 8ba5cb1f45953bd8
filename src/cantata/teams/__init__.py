"""cantata.teams: teams of agents, built on workflows.

Every team is a workflow: a manager executor (speaker policy, termination, routing log)
and one executor per participant, passing a turn token. So a team streams, checkpoints,
resumes in a fresh process, runs many conversations at once from one definition, and
nests as an agent (`team.as_agent()`). A participant whose tool needs a person's approval
(or whose model calls a tool declared without a function) pauses the team with that
request pending (`TeamSession.pending_requests`); `TeamSession.send_responses` answers it,
the participant's turn goes on, and so does the team.

The code executor and the file tools moved to `cantata.tools` (they are tools); their old
names here still resolve for one release, with a `DeprecationWarning`.
"""

from ._fresh_turn import FreshTurnParticipant
from ._moved import MOVED_TO_TOOLS as _MOVED_TO_TOOLS
from ._moved import moved_getattr as _moved_getattr
from .actor import AgentActor, AgentReply, AgentTask, register_agent
from .as_agent import STATE_KEY, TeamAgent, waits_for_user
from .channels import (
    AgentChannel,
    ChannelFactory,
    ChannelSet,
    ChannelSyncError,
    LocalChannel,
    ServiceChannel,
    TurnOptions,
    channel_key,
)
from .concurrent import Aggregator, Concurrent, ConcurrentAnswer, ConcurrentManager
from .events import RoutingEvent, TeamEvent, TeamMessageEvent, TeamStoppedEvent
from .group_chat import GroupChat, GroupChatManager
from .handoff import Handoff, HandoffInfo, HandoffManager, Swarm, handoff_of
from .magentic import (
    Magentic,
    MagenticLedgerEvent,
    MagenticManager,
    PlanReview,
    PlanReviewAnswer,
    PlanStep,
    ProgressLedger,
    TaskLedger,
)
from .manager import MANAGER_ID, ManagerState, TeamManager
from .participant import ParticipantExecutor
from .result import StopMessage, TaskResult
from .routing_eval import LabelledTask, RoutingReport, TaskOutcome, evaluate_routing
from .sequential import Sequential, SequentialManager
from .session import STATE_SCHEMA_VERSION, TaskInput, TeamBusyError, TeamSession
from .speakers import (
    DEFAULT_SELECTOR_PROMPT,
    NEXT_IN_ORDER,
    PREVIOUS_SPEAKER,
    ChatState,
    FunctionPolicy,
    RoundRobin,
    Selector,
    SpeakerChoice,
    SpeakerFunction,
    SpeakerPolicy,
)
from .specialists import CodeRunnerAgent, coder_agent, file_reader_agent
from .team import Team
from .termination import (
    AndTermination,
    External,
    Functional,
    FunctionCall,
    MaxMessage,
    Observation,
    OrTermination,
    SourceMatch,
    TerminationCondition,
    TextMention,
    Timeout,
    TokenUsage,
)
from .termination import Handoff as HandoffTermination
from .turns import AwaitingTask, SpeakTurn, TeamTask, TurnDone

__all__ = [
    "DEFAULT_SELECTOR_PROMPT",
    "MANAGER_ID",
    "NEXT_IN_ORDER",
    "PREVIOUS_SPEAKER",
    "STATE_KEY",
    "STATE_SCHEMA_VERSION",
    "AgentActor",
    "AgentChannel",
    "AgentReply",
    "AgentTask",
    "Aggregator",
    "AndTermination",
    "AwaitingTask",
    "ChannelFactory",
    "ChannelSet",
    "ChannelSyncError",
    "ChatState",
    "CodeRunnerAgent",
    "Concurrent",
    "ConcurrentAnswer",
    "ConcurrentManager",
    "External",
    "FreshTurnParticipant",
    "FunctionCall",
    "FunctionPolicy",
    "Functional",
    "GroupChat",
    "GroupChatManager",
    "Handoff",
    "HandoffInfo",
    "HandoffManager",
    "HandoffTermination",
    "LabelledTask",
    "LocalChannel",
    "Magentic",
    "MagenticLedgerEvent",
    "MagenticManager",
    "ManagerState",
    "MaxMessage",
    "Observation",
    "OrTermination",
    "ParticipantExecutor",
    "PlanReview",
    "PlanReviewAnswer",
    "PlanStep",
    "ProgressLedger",
    "RoundRobin",
    "RoutingEvent",
    "RoutingReport",
    "Selector",
    "Sequential",
    "SequentialManager",
    "ServiceChannel",
    "SourceMatch",
    "SpeakTurn",
    "SpeakerChoice",
    "SpeakerFunction",
    "SpeakerPolicy",
    "StopMessage",
    "Swarm",
    "TaskInput",
    "TaskLedger",
    "TaskOutcome",
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
    "TurnOptions",
    "channel_key",
    "coder_agent",
    "evaluate_routing",
    "file_reader_agent",
    "handoff_of",
    "register_agent",
    "waits_for_user",
]


# The code executor and the file tools moved to cantata.tools: their old names resolve
# from here for one release, with a DeprecationWarning.
__getattr__ = _moved_getattr("cantata.teams", _MOVED_TO_TOOLS)
