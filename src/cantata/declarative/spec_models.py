"""The spec model: what people write in YAML, checked by pydantic (and shipped as JSON
Schema). Each spec turns into component configs (`to_config`), the one model of
components that loading builds from."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, GetJsonSchemaHandler, model_validator
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

__all__ = [
    "SPEC_VERSION",
    "AgentSpec",
    "ConnectionSpec",
    "InputSpec",
    "ModelSpec",
    "RemoteAgentSpec",
    "SpeakerSpec",
    "StepSpec",
    "TeamSpec",
    "TerminationSpec",
    "ToolRef",
    "WorkflowSpec",
]

SPEC_VERSION = 1
"""Version 1: agents (chat_agent, remote_agent), teams (group_chat, sequential, concurrent,
handoff, magentic), workflow."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class ScriptedCallSpec(_Strict):
    """A tool call the scripted test model makes."""

    tool: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class ConnectionSpec(_Strict):
    """Where the model runs: a server (base_url, api_key), a GGUF file, or a script."""

    base_url: str | None = None
    api_key: str | None = Field(None, description="Write it as ${Env:NAME}, never the key.")
    timeout: float | None = None
    model_path: str | None = None
    n_ctx: int | None = None
    seed: int | None = None
    script: list[str | ScriptedCallSpec] | None = Field(
        None, description="Answers of the scripted test model: texts, or tool calls."
    )


class ModelSpec(_Strict):
    """The model: a `name` (``provider:model``), or `api` local (embedded), openai (a
    compatible server) or scripted. A bare string stands for ``{name: ...}``."""

    name: str | None = Field(
        None,
        description="provider:model, e.g. openai:gpt-4o-mini, anthropic:claude-sonnet-4-5, "
        "ollama:llama3.2, local (see docs/models.md); replaces id and api.",
    )
    id: str | None = None
    api: Literal["local", "openai", "scripted"] = "local"
    options: dict[str, Any] = Field(default_factory=dict)
    connection: ConnectionSpec = Field(default_factory=ConnectionSpec)

    @model_validator(mode="before")
    @classmethod
    def _from_name(cls, data: Any) -> Any:
        return {"name": data} if isinstance(data, str) else data

    @classmethod
    def __get_pydantic_json_schema__(
        cls, core_schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        schema = handler(core_schema)
        name = {"type": "string", "description": "provider:model, e.g. openai:gpt-4o-mini"}
        return {"anyOf": [schema, name]}


class ToolRef(_Strict):
    """A tool by reference: its name or import path, found in tools= or allow=."""

    id: str
    name: str | None = None


class InputSpec(_Strict):
    """A template argument: its default becomes the agent's argument."""

    description: str = ""
    default: Any = None
    required: bool = False


class MemorySpec(_Strict):
    """Long-term memory: facts recalled into each run, learned after it by the agent's model."""

    store: str = Field(description="Item store URL: sqlite:///memory.db, memory://, ...")
    scope: list[str] = Field(
        default_factory=lambda: ["user", "{user_id}", "facts"],
        description="Namespace template, filled from the run's tool_kwargs.",
    )
    embeddings: str | dict[str, Any] = Field(
        "hash", description="'hash', 'local', or {base_url, model} of an embeddings server."
    )
    learn: bool = Field(True, description="Extract new facts after each run.")
    limit: int = 5


class KnowledgeSpec(_Strict):
    """Documents the agent searches and cites."""

    store: str = Field(description="Item store URL: sqlite:///knowledge.db, memory://, ...")
    collection: list[str] = Field(default_factory=lambda: ["knowledge", "default"])
    embeddings: str | dict[str, Any] = "hash"
    files: list[str] = Field(
        default_factory=list, description="Ingested before the first run (changes only)."
    )
    limit: int = 4


class AgentSpec(_Strict):
    """A chat agent. When both `instructions` and `template` are given, `instructions` wins
    (`template` is the Semantic Kernel spelling; both are Jinja2 templates)."""

    version: Literal[1] = 1
    type: Literal["chat_agent"] = "chat_agent"
    name: str
    description: str = ""
    instructions: str | None = None
    template: str | None = None
    model: ModelSpec = Field(default_factory=ModelSpec)
    tools: list[ToolRef | str] = Field(default_factory=list)
    inputs: dict[str, InputSpec] = Field(default_factory=dict)
    outputs: dict[str, Any] = Field(default_factory=dict, description="Documentation only.")
    response_format: dict[str, Any] | None = Field(None, description="A JSON schema.")
    history: int | None = Field(None, description="Keep the last N messages per request.")
    max_iterations: int | None = None
    memory: MemorySpec | None = None
    knowledge: KnowledgeSpec | None = None
    guardrails: list[dict[str, Any]] = Field(
        default_factory=list,
        description="Guardrails, each {kind: pii|injection|length|schema|policy|function, ...}.",
    )
    usage_limits: dict[str, Any] | list[dict[str, Any]] | None = Field(
        None, description="UsageLimits fields (tokens, model_calls, cost with prices, per...)."
    )


class RemoteAgentSpec(_Strict):
    """An agent on another server, used like a local one: `protocol` ``responses`` (the
    Responses API at `url`, e.g. ``http://host:8000/v1``, serving the object `model`) or
    ``a2a`` (`url` is the agent's A2A base URL, e.g. ``http://host:8000/a2a/name``)."""

    version: Literal[1] = 1
    type: Literal["remote_agent"]
    name: str
    description: str = ""
    protocol: Literal["responses", "a2a"]
    url: str
    model: str | None = Field(None, description="responses: the served object's name.")
    instructions: str | None = Field(None, description="responses: sent with each run.")
    store: bool | None = Field(None, description="responses: the server keeps the thread.")
    token: str | None = Field(
        None, description="The server's key or token: write it as ${Env:NAME}, never itself."
    )
    timeout: float | None = Field(None, description="Seconds one request may take.")


class TerminationSpec(_Strict):
    """One condition, or `any` / `all` of several (OR / AND)."""

    max_messages: int | None = None
    text_mention: str | None = None
    source_match: list[str] | None = None
    handoff: str | None = None
    function_call: str | None = None
    timeout: float | None = None
    max_total_tokens: int | None = None
    any: list[TerminationSpec] | None = None
    all: list[TerminationSpec] | None = None


class SpeakerSpec(_Strict):
    """Who speaks next in a group chat: round robin, or a model choosing (selector)."""

    type: Literal["round_robin", "selector"] = "round_robin"
    model: ModelSpec | None = None
    prompt: str | None = None
    allow_repeat: bool | None = None
    max_attempts: int | None = None
    fallback: str | None = None


class TeamSpec(_Strict):
    """A team: participants are inline agent specs (chat or remote) or names of agents
    passed in agents=."""

    version: Literal[1] = 1
    type: Literal["group_chat", "sequential", "concurrent", "handoff", "magentic"]
    name: str
    description: str = ""
    participants: list[AgentSpec | RemoteAgentSpec | str] = Field(min_length=1)
    speaker: SpeakerSpec | None = None
    termination: TerminationSpec | None = None
    max_turns: int | None = None
    start: str | None = Field(None, description="handoff: who takes each new task.")
    handoffs: dict[str, list[str]] | None = Field(None, description="handoff: who to whom.")
    autonomous: bool | None = None
    manager: ModelSpec | None = Field(None, description="magentic: the orchestrator's model.")
    max_rounds: int | None = None
    max_stalls: int | None = None
    checkpoint_store: str | None = Field(None, description="A store URL (sqlite:///x.db).")


class StepSpec(AgentSpec):
    """A workflow step: an agent, and what it sees of the messages before it."""

    context_mode: Literal["full", "last_agent"] = "full"


class WhenSpec(_Strict):
    """A condition on the text of the message on an edge (no code in a spec)."""

    contains: str | None = None
    not_contains: str | None = None


class SwitchCaseSpec(_Strict):
    """A switch branch: `when` to `to`; the last branch is ``default: name``."""

    when: WhenSpec | None = None
    to: str | None = None
    default: str | None = None


class EdgeSpec(_Strict):
    """One of: ``from``+``to`` (with ``when``), ``from``+``fan_out``, ``fan_in``+``to``,
    ``from``+``switch``."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, populate_by_name=True)

    source: str | None = Field(None, alias="from")
    to: str | None = None
    when: WhenSpec | None = None
    fan_out: list[str] | None = None
    fan_in: list[str] | None = None
    switch: list[SwitchCaseSpec] | None = None


class WorkflowSpec(_Strict):
    """A workflow: agent steps, the edges between them, and where checkpoints go."""

    version: Literal[1] = 1
    type: Literal["workflow"]
    name: str
    description: str = ""
    start: str
    executors: list[StepSpec] = Field(min_length=1)
    edges: list[EdgeSpec] = Field(default_factory=list)
    max_supersteps: int | None = None
    checkpoint_store: str | None = Field(None, description="A store URL (sqlite:///x.db).")
