"""`cantata schema`: print the JSON Schema of specs, for editors (YAML language servers)."""

from __future__ import annotations

import json

import typer

__all__ = ["schema_command"]


def schema_command() -> None:
    """Print the JSON Schema of agent, remote agent, team and workflow specs, for editors."""
    from ..declarative import spec_schema

    typer.echo(json.dumps(spec_schema(), indent=2, sort_keys=True))
