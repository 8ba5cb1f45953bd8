"""The saved shape of runtime and agent state, and its schema versions.

Schema versions (refuse anything else):

- 1: runtime state ``{"schema_version", "agents": {"type/key": record}, "subscriptions"}``;
  an agent record ``{"schema_version", "state", "handled"}`` where ``state`` is the agent's
  `save_state()` through the core type registry and ``handled`` its recent message ids.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..core import (
    CantataError,
    ConfigurationError,
    SchemaVersionError,
    SerializationError,
    from_json,
    to_json,
)
from .agent import BaseAgent
from .ids import AgentId

__all__ = ["SCHEMA_VERSION"]

SCHEMA_VERSION = 1

Handled = None | str | dict[str, None]


def check_version(data: Any, what: str) -> Mapping[str, Any]:
    """Refuse data that is not a mapping or carries a schema version this code does not know."""
    if not isinstance(data, Mapping):
        raise SerializationError(f"{what} must be a JSON object, got {type(data).__name__}")
    version = data.get("schema_version")
    if version != SCHEMA_VERSION:
        raise SchemaVersionError(
            f"{what} has schema_version {version!r}; this cantata reads version "
            f"{SCHEMA_VERSION} only: load it with the cantata version that saved it"
        )
    return data


def handled_ids(handled: Handled) -> list[str]:
    """The handled-id window as a list, oldest first."""
    if handled is None:
        return []
    if isinstance(handled, str):
        return [handled]
    return list(handled)


def encode_agent(state: Mapping[str, Any], handled: Handled) -> dict[str, Any]:
    """One agent's saved record."""
    return {
        "schema_version": SCHEMA_VERSION,
        "state": to_json(dict(state)),
        "handled": handled_ids(handled),
    }


def decode_agent(data: Any, where: str) -> tuple[dict[str, Any], list[str]]:
    """The agent state and handled ids of a saved record."""
    record = check_version(data, f"saved state of agent {where}")
    state = from_json(record.get("state", {}))
    handled = record.get("handled", [])
    if not isinstance(state, dict) or not isinstance(handled, list):
        raise SerializationError(f"saved state of agent {where} is malformed")
    return state, [str(h) for h in handled]


def decode_runtime(data: Any) -> tuple[list[Any], list[tuple[AgentId, dict[str, Any], list[str]]]]:
    """The subscriptions and agent records of saved runtime state; any malformed part
    raises `SerializationError` (or `SchemaVersionError`) before anything is used."""
    record = check_version(data, "runtime state")
    raw_subs = record.get("subscriptions", [])
    raw_agents = record.get("agents", {})
    if not isinstance(raw_subs, list) or not isinstance(raw_agents, Mapping):
        raise SerializationError(
            "runtime state is malformed: 'subscriptions' must be a list and 'agents' an object"
        )
    subs = [from_json(raw) for raw in raw_subs]
    for sub in subs:
        if not all(hasattr(sub, name) for name in ("id", "is_match", "map_to_agent")):
            raise SerializationError(f"saved subscription {sub!r} is not a Subscription")
    agents: list[tuple[AgentId, dict[str, Any], list[str]]] = []
    for text, saved in raw_agents.items():
        try:
            agent_id = AgentId.parse(text)
        except ConfigurationError as exc:
            raise SerializationError(f"runtime state has a bad agent id: {exc}") from exc
        agents.append((agent_id, *decode_agent(saved, text)))
    return subs, agents


async def restore(agent: BaseAgent, state: dict[str, Any], agent_id: AgentId) -> None:
    """Hand saved state to an agent; its own failure on that data is a `SerializationError`."""
    try:
        await agent.load_state(state)
    except CantataError:
        raise
    except Exception as exc:
        raise SerializationError(
            f"agent {agent_id} could not load its saved state ({exc!r}); make its "
            "load_state accept what its save_state returns"
        ) from exc
