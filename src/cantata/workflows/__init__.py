"""cantata.workflows: graphs of executors (code or agents) that pass typed messages.

Build a graph with `WorkflowBuilder`, run it with `Workflow.run` / `run_stream`. Runs go
through the actor runtime (`cantata.runtime`) superstep by superstep, checkpoint at every
boundary when given a `CheckpointStore` (sealed records, so damage is refused), and may
stop to ask a person for input.

A run's outputs are what executors yield, and the answer of every agent executor without
out-edges (``output_from=`` on the builder chooses otherwise). `Workflow.run` keeps the
outputs, status and pending requests; its events only with ``include_events=True``
(`run_stream` yields them live).
"""

from .agent_executor import (
    AgentExecutor,
    AgentExecutorRequest,
    AgentExecutorResponse,
    AgentExecutorState,
    ContextMode,
    TurnToken,
)
from .as_agent import REQUEST_INFO, WorkflowAgent
from .builder import WorkflowBuilder
from .checkpoint import SCHEMA_VERSION, WorkflowCheckpoint
from .checkpoint_store import (
    CheckpointStore,
    FileCheckpointStore,
    InMemoryCheckpointStore,
    StateStoreCheckpointStore,
)
from .context import RunLog, WorkflowContext
from .edges import Case, Default, EdgeGroup
from .errors import ValidationProblem, WorkflowValidationError
from .events import (
    AgentResponseEvent,
    AgentUpdateEvent,
    ExecutorCompletedEvent,
    ExecutorEvent,
    ExecutorFailedEvent,
    ExecutorInvokedEvent,
    OutputEvent,
    RequestInfoEvent,
    RunStatus,
    StatusEvent,
    SuperstepCompletedEvent,
    SuperstepStartedEvent,
    WarningEvent,
    WorkflowEvent,
    WorkflowFailedEvent,
    WorkflowStartedEvent,
)
from .executor import (
    Executor,
    FunctionExecutor,
    NeedsPersonRequest,
    executor,
    handler,
    response_handler,
)
from .journal import EffectJournal, effect_key
from .run import WorkflowRun
from .stream import WorkflowEventStream
from .workflow import Workflow, WorkflowRunResult

__all__ = [
    "REQUEST_INFO",
    "SCHEMA_VERSION",
    "AgentExecutor",
    "AgentExecutorRequest",
    "AgentExecutorResponse",
    "AgentExecutorState",
    "AgentResponseEvent",
    "AgentUpdateEvent",
    "Case",
    "CheckpointStore",
    "ContextMode",
    "Default",
    "EdgeGroup",
    "EffectJournal",
    "Executor",
    "ExecutorCompletedEvent",
    "ExecutorEvent",
    "ExecutorFailedEvent",
    "ExecutorInvokedEvent",
    "FileCheckpointStore",
    "FunctionExecutor",
    "InMemoryCheckpointStore",
    "NeedsPersonRequest",
    "OutputEvent",
    "RequestInfoEvent",
    "RunLog",
    "RunStatus",
    "StateStoreCheckpointStore",
    "StatusEvent",
    "SuperstepCompletedEvent",
    "SuperstepStartedEvent",
    "TurnToken",
    "ValidationProblem",
    "WarningEvent",
    "Workflow",
    "WorkflowAgent",
    "WorkflowBuilder",
    "WorkflowCheckpoint",
    "WorkflowContext",
    "WorkflowEvent",
    "WorkflowEventStream",
    "WorkflowFailedEvent",
    "WorkflowRun",
    "WorkflowRunResult",
    "WorkflowStartedEvent",
    "WorkflowValidationError",
    "effect_key",
    "executor",
    "handler",
    "response_handler",
]
