"""Specs as component configs: the translation from what people write to the one model
of components (a spec is configs written for people)."""

from __future__ import annotations

from typing import Any

from .errors import SpecError
from .spec_models import (
    AgentSpec,
    ModelSpec,
    RemoteAgentSpec,
    SpeakerSpec,
    TeamSpec,
    TerminationSpec,
    ToolRef,
    WorkflowSpec,
)

__all__ = [
    "agent_config",
    "model_config",
    "remote_agent_config",
    "team_config",
    "termination_config",
    "workflow_config",
]

_M = "cantata.models."
_T = "cantata.teams."


def _component(provider: str, kind: str, config: dict[str, Any]) -> dict[str, Any]:
    return {"provider": provider, "component_type": kind, "version": 1, "config": config}


def model_config(spec: ModelSpec, *, where: str) -> dict[str, Any]:
    """The client config of a `model:` block; `options` become the client's chat options."""
    conn = spec.connection
    if spec.name is not None:
        return _named_model(spec, where=where)
    if spec.api == "scripted":
        script = [s if isinstance(s, str) else s.model_dump() for s in conn.script or []]
        return _component(_M + "ScriptedChatClient", "model", {"script": script})
    if spec.api == "local":
        local: dict[str, Any] = {"default_options": spec.options}
        for key in ("model_path", "n_ctx", "seed"):
            if getattr(conn, key) is not None:
                local[key] = getattr(conn, key)
        return _component(_M + "LocalChatClient", "model", local)
    if not spec.id:
        raise SpecError(f"{where}: model.id (the model's name on the server) is needed")
    remote: dict[str, Any] = {"model": spec.id, "default_options": spec.options}
    for key in ("base_url", "api_key", "timeout"):
        if getattr(conn, key) is not None:
            remote[key] = getattr(conn, key)
    return _component(_M + "OpenAIChatClient", "model", remote)


def _named_model(spec: ModelSpec, *, where: str) -> dict[str, Any]:
    from ..core import ConfigurationError
    from ..models import parse_model_name

    assert spec.name is not None  # the caller's check
    if spec.id is not None or "api" in spec.model_fields_set:
        raise SpecError(f"{where}: model.name replaces model.id and model.api; give one of them")
    try:
        parse_model_name(spec.name)
    except ConfigurationError as exc:
        raise SpecError(f"{where}: {exc}") from None
    config: dict[str, Any] = {"name": spec.name, "default_options": spec.options}
    for key in ("base_url", "api_key", "timeout"):
        if getattr(spec.connection, key) is not None:
            config[key] = getattr(spec.connection, key)
    return _component(_M + "resolve_model", "model", config)


def _tool(ref: ToolRef | str) -> dict[str, Any]:
    if isinstance(ref, str):
        return _component("cantata.tools.FunctionTool", "tool", {"id": ref})
    body = {"id": ref.id} if ref.name is None else {"id": ref.id, "name": ref.name}
    return _component("cantata.tools.FunctionTool", "tool", body)


def agent_config(spec: AgentSpec) -> dict[str, Any]:
    """The `ChatAgent` config of an agent spec. `instructions` wins over `template`;
    `inputs` defaults become template arguments; `response_format` a chat option."""
    where = f"agent {spec.name!r}"
    options = dict(spec.model.options)
    if spec.response_format is not None:
        options["response_format"] = spec.response_format
    config: dict[str, Any] = {
        "name": spec.name,
        "description": spec.description,
        # the options live on the agent (agent.options), not twice on its client too
        "client": model_config(spec.model.model_copy(update={"options": {}}), where=where),
        "tools": [_tool(t) for t in spec.tools],
        "options": options,
        "arguments": {k: i.default for k, i in spec.inputs.items() if i.default is not None},
    }
    text = spec.instructions if spec.instructions is not None else spec.template
    if text is not None:
        config["instructions"] = text
    if spec.history is not None:
        config["history_reducer"] = _component(
            "cantata.agents.TruncatingReducer", "reducer", {"keep_last": spec.history}
        )
    if spec.max_iterations is not None:
        config["max_iterations"] = spec.max_iterations
    providers = []
    if spec.memory is not None:
        providers.append(
            _component(
                "cantata.agents.MemoryProvider", "context_provider", spec.memory.model_dump()
            )
        )
    if spec.knowledge is not None:
        providers.append(
            _component(
                "cantata.agents.KnowledgeProvider", "context_provider", spec.knowledge.model_dump()
            )
        )
    if providers:
        config["context_providers"] = providers
    if spec.guardrails:
        config["guardrails"] = spec.guardrails
    if spec.usage_limits is not None:
        config["usage_limits"] = spec.usage_limits
    return _component("cantata.agents.ChatAgent", "agent", config)


def remote_agent_config(spec: RemoteAgentSpec) -> dict[str, Any]:
    """The `ResponsesAgent` or `A2AAgent` config of a remote agent spec."""
    where = f"remote agent {spec.name!r}"
    config: dict[str, Any] = {"name": spec.name, "description": spec.description}
    if spec.timeout is not None:
        config["timeout"] = spec.timeout
    if spec.protocol == "a2a":
        for key in ("model", "instructions", "store"):
            if getattr(spec, key) is not None:
                raise SpecError(f"{where}: {key!r} is for protocol responses only")
        config.update(url=spec.url, token=spec.token)
        return _component("cantata.agents.A2AAgent", "agent", config)
    if not spec.model:
        raise SpecError(f"{where}: protocol responses needs model: (the served object's name)")
    config.update(base_url=spec.url, model=spec.model, api_key=spec.token)
    config.update(instructions=spec.instructions, store=spec.store)
    return _component("cantata.agents.ResponsesAgent", "agent", config)


def _participant(spec: AgentSpec | RemoteAgentSpec | str) -> dict[str, Any]:
    if isinstance(spec, str):
        return _component("cantata.declarative.AgentRef", "agent", {"name": spec})
    if isinstance(spec, RemoteAgentSpec):
        return remote_agent_config(spec)
    return agent_config(spec)


_SIMPLE = {
    "max_messages": ("MaxMessage", "max_messages"),
    "text_mention": ("TextMention", "text"),
    "source_match": ("SourceMatch", "sources"),
    "handoff": ("HandoffTermination", "target"),
    "function_call": ("FunctionCall", "function_name"),
    "timeout": ("Timeout", "seconds"),
    "max_total_tokens": ("TokenUsage", "max_total_tokens"),
}


def termination_config(spec: TerminationSpec, *, where: str) -> dict[str, Any]:
    """One condition's config; several fields in one block are OR-ed."""
    parts: list[dict[str, Any]] = []
    for key, (cls, arg) in _SIMPLE.items():
        value = getattr(spec, key)
        if value is not None:
            parts.append(_component(_T + cls, "termination", {arg: value}))
    for key, cls in (("any", "OrTermination"), ("all", "AndTermination")):
        group = getattr(spec, key)
        if group is not None:
            inner = [termination_config(s, where=f"{where}.{key}") for s in group]
            parts.append(_join(cls, inner, where=f"{where}.{key}"))
    if not parts:
        raise SpecError(f"{where}: a termination block needs at least one condition")
    return _join("OrTermination", parts, where=where)


def _join(cls: str, parts: list[dict[str, Any]], *, where: str) -> dict[str, Any]:
    if not parts:
        raise SpecError(f"{where}: an empty list of conditions")
    if len(parts) == 1:
        return parts[0]
    return _component(_T + cls, "termination", {"conditions": parts})


def _speaker(spec: SpeakerSpec, *, where: str) -> dict[str, Any]:
    if spec.type == "round_robin":
        return _component(_T + "RoundRobin", "speaker_policy", {})
    if spec.model is None:
        raise SpecError(f"{where}: a selector speaker needs a model: block")
    config: dict[str, Any] = {"client": model_config(spec.model, where=where)}
    for key in ("prompt", "allow_repeat", "max_attempts", "fallback"):
        if getattr(spec, key) is not None:
            config[key] = getattr(spec, key)
    return _component(_T + "Selector", "speaker_policy", config)


_ONLY = {
    "handoff": ("start", "handoffs", "autonomous"),
    "magentic": ("manager", "max_rounds", "max_stalls"),
}


def _kind_fields(spec: TeamSpec, config: dict[str, Any], where: str) -> None:
    """Copy the fields of handoff and magentic teams; refuse them on other types."""
    for kind, keys in _ONLY.items():
        for key in keys:
            value = getattr(spec, key)
            if value is None:
                continue
            if spec.type != kind:
                raise SpecError(f"{where}: {key!r} is for {kind} teams only")
            config[key] = model_config(value, where=where) if key == "manager" else value
    if spec.type == "magentic" and spec.manager is None:
        raise SpecError(f"{where}: a magentic team needs a manager: model block")
    if spec.type in ("handoff", "magentic") and spec.max_turns is not None:
        if spec.type == "magentic":
            raise SpecError(f"{where}: a magentic team counts max_rounds, not max_turns")
        config["max_turns"] = spec.max_turns


def team_config(spec: TeamSpec) -> dict[str, Any]:
    """The team config of a team spec; a participant given by name is a reference."""
    where = f"team {spec.name!r}"
    participants = [_participant(p) for p in spec.participants]
    config: dict[str, Any] = {
        "name": spec.name,
        "description": spec.description,
        "participants": participants,
    }
    if spec.termination is not None:
        config["termination"] = termination_config(spec.termination, where=where)
    cls = {"group_chat": "GroupChat", "sequential": "Sequential", "concurrent": "Concurrent",
           "handoff": "Handoff", "magentic": "Magentic"}  # fmt: skip
    _kind_fields(spec, config, where)
    if spec.type == "group_chat":
        config["speaker"] = _speaker(spec.speaker or SpeakerSpec(), where=where)
        if spec.max_turns is not None:
            config["max_turns"] = spec.max_turns
    elif spec.speaker is not None or (spec.max_turns is not None and spec.type != "handoff"):
        raise SpecError(f"{where}: speaker and max_turns are for group_chat teams only")
    return _component(_T + cls[spec.type], "team", config)


def workflow_config(spec: WorkflowSpec) -> dict[str, Any]:
    """The workflow config of a workflow spec: each step an agent config."""
    steps = [{"agent": agent_config(s), "context_mode": s.context_mode} for s in spec.executors]
    edges = [e.model_dump(by_alias=True, exclude_none=True) for e in spec.edges]
    config: dict[str, Any] = {
        "name": spec.name,
        "description": spec.description,
        "start": spec.start,
        "executors": steps,
        "edges": edges,
    }
    if spec.max_supersteps is not None:
        config["max_supersteps"] = spec.max_supersteps
    return _component("cantata.workflows.Workflow", "workflow", config)
