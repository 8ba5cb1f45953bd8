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
from .remote_a2a import A2AAgent, A2AThread
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

__all__ = [
    "AGENT_ID_KEY",
    "CHAT_OPTION_KEYWORDS",
    "CLOSE_TIMEOUT",
    "CONTEXT_SOURCE_KEY",
    "MAX_RENDER_CHARS",
    "MAX_RENDER_SECONDS",
    "RUN_KEYWORDS",
    "THREAD_SCHEMA_VERSION",
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
    "HistoryReducer",
    "InMemoryMessageStore",
    "IngestReport",
    "InstructionTemplate",
    "IntermediateCallback",
    "Knowledge",
    "KnowledgeError",
    "KnowledgeProvider",
    "LocalThread",
    "Memory",
    "MemoryOperation",
    "MemoryProvider",
    "MemoryUpdate",
    "MessageStore",
    "MessageStoreFactory",
    "ResponsesAgent",
    "ResponsesThread",
    "RunKeywords",
    "ServiceThread",
    "StateStoreMessageStore",
    "SummarizingReducer",
    "ThreadState",
    "ToolLike",
    "TruncatingReducer",
    "UnknownOptionError",
    "agent_middleware",
    "chat_keywords",
    "knowledge_tool",
    "memory_tools",
]
