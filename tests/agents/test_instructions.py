"""Instruction templates: Jinja2, sandboxed, strict, rendered per call."""

from __future__ import annotations

import pytest

from cantata.agents import InstructionTemplate
from cantata.core import ConfigurationError


def test_static_instructions_skip_the_template_engine() -> None:
    template = InstructionTemplate("Be brief.")
    assert template.is_static
    assert template.render({"ignored": 1}) == "Be brief."


def test_arguments_fill_the_template() -> None:
    template = InstructionTemplate("Hello {{ name }}{% if formal %}, sir{% endif %}.")
    assert template.render({"name": "Ada", "formal": True}) == "Hello Ada, sir."
    assert template.render({"name": "Bo", "formal": False}) == "Hello Bo."


def test_missing_argument_is_named_with_the_agent() -> None:
    template = InstructionTemplate("Hello {{ name }}", owner="greeter")
    with pytest.raises(ConfigurationError, match=r"greeter.*name"):
        template.render({})


def test_invalid_template_is_refused_at_definition() -> None:
    with pytest.raises(ConfigurationError, match=r"`bad`.*Jinja2"):
        InstructionTemplate("{% if %}", owner="bad")


def test_sandbox_blocks_python_internals() -> None:
    template = InstructionTemplate("{{ x.__class__.__subclasses__() }}", owner="evil")
    with pytest.raises(ConfigurationError, match="evil"):
        template.render({"x": 1})


def test_rendering_does_not_change_the_arguments() -> None:
    template = InstructionTemplate("{% set name = 'changed' %}{{ name }}")
    arguments = {"name": "kept"}
    assert template.render(arguments) == "changed"
    assert arguments == {"name": "kept"}


@pytest.mark.parametrize(
    "source",
    [
        "{{ 1 / n }}",
        "{{ range(10 ** 9) | list }}",
        "{{ n.bit_length(1, 2) }}",
        "{{ text | int(1, 2, 3) }}",
    ],
)
def test_any_rendering_failure_is_a_configuration_error_naming_the_agent(source: str) -> None:
    template = InstructionTemplate(source, owner="helper")
    with pytest.raises(ConfigurationError, match="helper"):
        template.render({"n": 0, "text": "x"})


@pytest.mark.parametrize(
    "source", ["{% set _ = items.append(1) %}", "{{ cfg.update(k=1) }}", "{{ items.pop() }}"]
)
def test_a_template_cannot_change_its_arguments(source: str) -> None:
    items, cfg = [0], {"a": 1}
    template = InstructionTemplate(source, owner="helper")
    with pytest.raises(ConfigurationError, match="helper"):
        template.render({"items": items, "cfg": cfg})
    assert items == [0] and cfg == {"a": 1}
