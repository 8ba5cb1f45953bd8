"""The shipped JSON Schema: it is what the spec model generates, and it checks specs."""

from __future__ import annotations

import json

import jsonschema
import pytest
import yaml
from typer.testing import CliRunner

from cantata.cli import app
from cantata.declarative import spec_schema
from cantata.declarative.schema import generate_schema

from .test_load import AGENT, ROUND_ROBIN


def test_shipped_schema_is_the_generated_one() -> None:
    assert spec_schema() == json.loads(json.dumps(generate_schema()))


def test_schema_accepts_good_specs_and_rejects_bad_ones() -> None:
    schema = spec_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    for text in (AGENT, ROUND_ROBIN):
        jsonschema.validate(yaml.safe_load(text), schema)
    bad = yaml.safe_load(AGENT) | {"colour": "red"}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schema)


def test_cantata_schema_prints_it() -> None:
    result = CliRunner().invoke(app, ["schema"])
    assert result.exit_code == 0
    assert json.loads(result.output) == spec_schema()


def test_every_example_spec_checks_against_the_schema() -> None:
    from pathlib import Path

    examples = sorted((Path(__file__).resolve().parents[2] / "examples").glob("*.yaml"))
    assert len(examples) >= 6
    schema = spec_schema()
    for path in examples:
        jsonschema.validate(yaml.safe_load(path.read_text()), schema)
