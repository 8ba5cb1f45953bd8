"""Every name cantata.teams exports imports and stays exported; registered types round-trip
through JSON (they travel in checkpoints)."""

from __future__ import annotations

import importlib

import cantata.teams as teams
from cantata.core import Message, Usage, dumps, loads
from cantata.teams import AgentReply, AgentTask, StopMessage, TaskResult
from cantata.teams.manager import ManagerState
from cantata.teams.turns import AwaitingTask, SpeakTurn, TeamTask, TurnDone

EXPECTED = {
    "AgentActor", "AgentChannel", "AgentReply", "AgentTask", "AndTermination",
    "ChannelFactory", "ChannelSet", "ChannelSyncError", "ChatState", "DEFAULT_SELECTOR_PROMPT",
    "External", "FunctionCall", "FunctionPolicy", "Functional", "GroupChat", "HANDOFF_TO_KEY",
    "Handoff", "LocalChannel", "MaxMessage", "Observation", "OrTermination", "RoundRobin",
    "RoutingEvent", "STATE_SCHEMA_VERSION", "Selector", "ServiceChannel", "SourceMatch",
    "SpeakerChoice", "SpeakerFunction", "SpeakerPolicy", "StopMessage", "TaskInput",
    "TaskResult", "Team", "TeamAgent", "TeamBusyError", "TeamEvent", "TeamManager",
    "TeamMessageEvent", "TeamSession", "TeamStoppedEvent", "TerminationCondition",
    "TextMention", "Timeout", "TokenUsage", "channel_key", "register_agent",
}  # fmt: skip

PROTOCOL = {
    "AwaitingTask", "SpeakTurn", "TeamTask", "TurnDone", "MANAGER_ID", "ManagerState",
    "ConcurrentManager", "GroupChatManager", "HandoffManager", "MagenticManager",
    "SequentialManager", "ParticipantExecutor",
}  # fmt: skip
"""What the executors pass among themselves and the built-in executors: not exported."""


def test_exported_names_import_and_stay_exported() -> None:
    assert set(teams.__all__) >= EXPECTED
    assert not set(teams.__all__) & PROTOCOL
    module = importlib.import_module("cantata.teams")
    for name in teams.__all__:
        assert getattr(module, name) is not None, name


def test_team_values_round_trip_through_json() -> None:
    m = Message("assistant", "hi", author_name="a")
    values = [
        TeamTask([m]),
        AwaitingTask("c1"),
        SpeakTurn("c1", 3),
        TurnDone("a", [m], Usage(1, 2), "k"),
        TaskResult([m], StopMessage("done", "MaxMessage")),
        ManagerState("c1", 2, 0, "a", 1, {"count": 3}, False, {"x": [1]}),
        AgentTask([m], reply_topic="t"),
        AgentReply("a", [m], Usage(3, 4)),
    ]
    for value in values:
        assert loads(dumps(value)) == value
    assert TaskResult([], None).stop_reason is None
