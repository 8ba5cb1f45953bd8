"""Every name in cantata.workflows.__all__ imports and stays exported."""

from __future__ import annotations

import cantata.workflows as workflows

EXPECTED = {
    "AgentExecutor", "AgentExecutorRequest", "AgentExecutorResponse", "AgentResponseEvent",
    "AgentUpdateEvent", "Case", "CheckpointStore", "ContextMode", "Default", "Executor",
    "ExecutorCompletedEvent", "ExecutorFailedEvent", "ExecutorInvokedEvent",
    "FileCheckpointStore", "FunctionExecutor", "InMemoryCheckpointStore", "OutputEvent",
    "RequestInfoEvent", "RunStatus", "StateStoreCheckpointStore", "StatusEvent",
    "SuperstepCompletedEvent", "SuperstepStartedEvent", "TurnToken", "WarningEvent",
    "Workflow", "WorkflowAgent", "WorkflowBuilder", "WorkflowCheckpoint", "WorkflowContext",
    "WorkflowEvent", "WorkflowEventStream", "WorkflowFailedEvent", "WorkflowRun",
    "WorkflowRunResult", "WorkflowStartedEvent", "executor", "handler", "response_handler",
}  # fmt: skip


def test_exports() -> None:
    assert set(workflows.__all__) >= EXPECTED
    for name in workflows.__all__:
        assert getattr(workflows, name) is not None, name
