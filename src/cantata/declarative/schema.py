"""The JSON Schema of specs, shipped as ``spec.schema.json`` beside this module so editors
(YAML language servers) complete and check spec files; `cantata schema` prints it. A test
checks that the shipped file is the one the spec model generates."""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

from pydantic import TypeAdapter

from .spec_models import AgentSpec, RemoteAgentSpec, TeamSpec, WorkflowSpec

__all__ = ["SCHEMA_FILE", "generate_schema", "spec_schema"]

SCHEMA_FILE = "spec.schema.json"


def generate_schema() -> dict[str, Any]:
    """The schema the spec model generates (what the shipped file must equal)."""
    schema = TypeAdapter(AgentSpec | RemoteAgentSpec | TeamSpec | WorkflowSpec).json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "cantata spec"
    return schema


def spec_schema() -> dict[str, Any]:
    """The JSON Schema shipped with the package."""
    text = resources.files(__package__).joinpath(SCHEMA_FILE).read_text(encoding="utf-8")
    data: dict[str, Any] = json.loads(text)
    return data
