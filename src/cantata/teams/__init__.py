"""cantata.teams: teams of agents, built on workflows.

Every team is a workflow: a manager executor (speaker policy, termination, routing log)
and one executor per participant, passing a turn token. So a team streams, checkpoints,
resumes in a fresh process, runs many conversations at once from one definition, and
nests as an agent (`team.as_agent()`). A participant whose tool needs a person's approval
(or whose model calls a tool declared without a function) pauses the team with that
request pending (`TeamSession.pending_requests`); `TeamSession.send_responses` answers it,
the participant's turn goes on, and so does the team.

The package exports what users write: teams, speaker policies, termination conditions,
channels, results and events, `Team` and `TeamManager` for a team of one's own. The
messages the executors pass among themselves (`cantata.teams.turns`), the manager's state
and the built-in managers and participants live in their modules. The code executor and
the file tools moved to `cantata.tools` (they are tools). Old names here still resolve for
one release, with a `DeprecationWarning`.
"""

from ._fresh_turn import FreshTurnParticipant
from ._moved import BEHIND as _BEHIND
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
from .concurrent import Aggregator, Concurrent, ConcurrentAnswer
from .events import RoutingEvent, TeamEvent, TeamMessageEvent, TeamStoppedEvent
from .group_chat import GroupChat
from .handoff import HANDOFF_TO_KEY, Handoff, HandoffInfo, Swarm, handoff_of
from .magentic import (
    Magentic,
    MagenticLedgerEvent,
    PlanReview,
    PlanReviewAnswer,
    PlanStep,
    ProgressLedger,
    TaskLedger,
)
from .manager import TeamManager
from .result import StopMessage, TaskResult
from .routing_eval import LabelledTask, RoutingReport, TaskOutcome, evaluate_routing
from .sequential import Sequential
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

__all__ = [
    "DEFAULT_SELECTOR_PROMPT",
    "HANDOFF_TO_KEY",
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
    "ChannelFactory",
    "ChannelSet",
    "ChannelSyncError",
    "ChatState",
    "CodeRunnerAgent",
    "Concurrent",
    "ConcurrentAnswer",
    "External",
    "FreshTurnParticipant",
    "FunctionCall",
    "FunctionPolicy",
    "Functional",
    "GroupChat",
    "Handoff",
    "HandoffInfo",
    "HandoffTermination",
    "LabelledTask",
    "LocalChannel",
    "Magentic",
    "MagenticLedgerEvent",
    "MaxMessage",
    "Observation",
    "OrTermination",
    "PlanReview",
    "PlanReviewAnswer",
    "PlanStep",
    "ProgressLedger",
    "RoundRobin",
    "RoutingEvent",
    "RoutingReport",
    "Selector",
    "Sequential",
    "ServiceChannel",
    "SourceMatch",
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
    "TerminationCondition",
    "TextMention",
    "Timeout",
    "TokenUsage",
    "TurnOptions",
    "channel_key",
    "coder_agent",
    "evaluate_routing",
    "file_reader_agent",
    "handoff_of",
    "register_agent",
    "waits_for_user",
]


# The code executor and the file tools moved to cantata.tools, and the executors' own
# protocol behind the package: their old names resolve from here for one release, with a
# DeprecationWarning that names the new import.
__getattr__ = _moved_getattr("cantata.teams", _MOVED_TO_TOOLS, behind=_BEHIND)
