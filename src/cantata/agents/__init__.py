"""cantata.agents: stateless agents that run on threads.

An agent is a definition (name, description, instructions, model, tools); the
conversation lives in an `AgentThread` that the caller passes in and gets back on the
`AgentResponse`. One agent serves many threads at once, and one thread can be written by
several agents in turn.
"""

from .agent import AGENT_ID_KEY, Agent, AgentInput, IntermediateCallback
from .agent_middleware import AgentMiddleware, AgentRunContext, agent_middleware
from .chat_agent import ChatAgent, ToolLike
from .closing import CLOSE_TIMEOUT
from .context_providers import (
    CONTEXT_SOURCE_KEY,
    ContextProvider,
    ContextProviderError,
    ContextRun,
)
from .guardrail_checks import (
    PII_KINDS,
    PiiFinding,
    PiiKind,
    find_pii,
    injection_guardrail,
    length_guardrail,
    looks_like_injection,
    pii_guardrail,
    policy_guardrail,
    redact_pii,
    schema_guardrail,
)
from .guardrails import (
    VERDICT_SCHEMA,
    Guardrail,
    GuardrailCheck,
    GuardrailContext,
    GuardrailResult,
    GuardrailStage,
    Verdict,
    apply_guardrails,
    input_guardrail,
    output_guardrail,
    replace_text,
    tool_guardrail,
)
from .instructions import MAX_RENDER_CHARS, MAX_RENDER_SECONDS, InstructionTemplate
from .knowledge import (
    IngestReport,
    Knowledge,
    KnowledgeError,
    KnowledgeProvider,
    knowledge_tool,
)
from .memory import Fact, Memory, MemoryOperation, MemoryProvider, MemoryUpdate, memory_tools
from .message_store import (
    InMemoryMessageStore,
    MessageStore,
    MessageStoreFactory,
    StateStoreMessageStore,
)
from .reducers import HistoryReducer, SummarizingReducer, TruncatingReducer
from .remote_a2a import A2A_INPUT_KEY, A2AAgent, A2AThread
from .remote_responses import ResponsesAgent, ResponsesThread
from .response import (
    AgentResponse,
    AgentResponseStream,
    AgentResponseUpdate,
    Citation,
    ContextAddition,
)
from .run_options import (
    CHAT_OPTION_KEYWORDS,
    RUN_KEYWORDS,
    ChatOptionKeywords,
    RunKeywords,
    UnknownOptionError,
    chat_keywords,
)
from .thread import THREAD_SCHEMA_VERSION, AgentThread, LocalThread, ServiceThread, ThreadState
from .usage import LimitName, ModelPrice, RunUsage, UsageLimits, UsageMeter

__all__ = [
    "A2A_INPUT_KEY",
    "AGENT_ID_KEY",
    "CHAT_OPTION_KEYWORDS",
    "CLOSE_TIMEOUT",
    "CONTEXT_SOURCE_KEY",
    "MAX_RENDER_CHARS",
    "MAX_RENDER_SECONDS",
    "PII_KINDS",
    "RUN_KEYWORDS",
    "THREAD_SCHEMA_VERSION",
    "VERDICT_SCHEMA",
    "A2AAgent",
    "A2AThread",
    "Agent",
    "AgentInput",
    "AgentMiddleware",
    "AgentResponse",
    "AgentResponseStream",
    "AgentResponseUpdate",
    "AgentRunContext",
    "AgentThread",
    "ChatAgent",
    "ChatOptionKeywords",
    "Citation",
    "ContextAddition",
    "ContextProvider",
    "ContextProviderError",
    "ContextRun",
    "Fact",
    "Guardrail",
    "GuardrailCheck",
    "GuardrailContext",
    "GuardrailResult",
    "GuardrailStage",
    "HistoryReducer",
    "InMemoryMessageStore",
    "IngestReport",
    "InstructionTemplate",
    "IntermediateCallback",
    "Knowledge",
    "KnowledgeError",
    "KnowledgeProvider",
    "LimitName",
    "LocalThread",
    "Memory",
    "MemoryOperation",
    "MemoryProvider",
    "MemoryUpdate",
    "MessageStore",
    "MessageStoreFactory",
    "ModelPrice",
    "PiiFinding",
    "PiiKind",
    "ResponsesAgent",
    "ResponsesThread",
    "RunKeywords",
    "RunUsage",
    "ServiceThread",
    "StateStoreMessageStore",
    "SummarizingReducer",
    "ThreadState",
    "ToolLike",
    "TruncatingReducer",
    "UnknownOptionError",
    "UsageLimits",
    "UsageMeter",
    "Verdict",
    "agent_middleware",
    "apply_guardrails",
    "chat_keywords",
    "find_pii",
    "injection_guardrail",
    "input_guardrail",
    "knowledge_tool",
    "length_guardrail",
    "looks_like_injection",
    "memory_tools",
    "output_guardrail",
    "pii_guardrail",
    "policy_guardrail",
    "redact_pii",
    "replace_text",
    "schema_guardrail",
    "tool_guardrail",
]
