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


@pytest.mark.parametrize(
    ("source", "arguments"),
    [
        ("{{ text * n }}", {"text": "ab", "n": 10**8}),  # refused before it is built
        ("{{ n * [text] }}", {"text": "ab", "n": 10**8}),
        ("{{ text.ljust(n) }}", {"text": "ab", "n": 10**9}),
        ("{{ text | center(n) }}", {"text": "ab", "n": 10**9}),
        ("{{ 10 ** n }}", {"n": 10**7}),
        ("{% for i in range(100000) %}{{ text }}{% endfor %}", {"text": "0123456789"}),
    ],
)
def test_a_rendering_larger_than_the_limit_is_refused(
    source: str, arguments: dict[str, object]
) -> None:
    template = InstructionTemplate(source, owner="helper")
    with pytest.raises(ConfigurationError, match=r"`helper` went past a rendering limit.*char"):
        template.render(arguments)


def test_a_rendering_that_loops_too_long_is_refused_even_writing_nothing() -> None:
    loop = "{% for a in xs %}{% for b in xs %}{% for c in xs %}"
    loops = loop + "{% endfor %}" * 3
    template = InstructionTemplate(loops, owner="helper", max_seconds=0.05)
    with pytest.raises(ConfigurationError, match=r"longer than 0\.05 s"):
        template.render({"xs": list(range(1_000))})  # a billion turns without the bound


def test_limits_are_per_template_and_renderings_within_them_pass() -> None:
    small = InstructionTemplate("{{ text * 3 }}", max_chars=5)
    with pytest.raises(ConfigurationError, match="5 characters"):
        small.render({"text": "ab"})
    assert InstructionTemplate("{{ text * 3 }}").render({"text": "ab"}) == "ababab"
    looped = "{% for i in range(1000) %}{{ i % 10 }}{% endfor %}"
    assert len(InstructionTemplate(looped).render({})) == 1000


@pytest.mark.parametrize("limits", [{"max_chars": 0}, {"max_seconds": float("inf")}])
def test_bad_limits_are_refused(limits: dict[str, float]) -> None:
    with pytest.raises(ConfigurationError, match="max_"):
        InstructionTemplate("{{ x }}", owner="helper", **limits)  # type: ignore[arg-type]


async def test_an_agent_takes_a_template_with_its_own_limits() -> None:
    from cantata.agents import ChatAgent
    from cantata.models import ScriptedChatClient

    template = InstructionTemplate("{{ text * 3 }}", owner="a", max_chars=5)
    agent = ChatAgent(ScriptedChatClient(["never"]), name="a", instructions=template)
    assert agent.instructions == "{{ text * 3 }}"
    with pytest.raises(ConfigurationError, match="rendering limit"):
        await agent.run("x", arguments={"text": "ab"})


@pytest.mark.parametrize(
    ("source", "arguments"),
    [
        ("{{ f % 1 }}", {"f": "%0999999999d"}),
        ("{{ f | format(1) }}", {"f": "%0999999999d"}),
        ("{{ f.format(1) }}", {"f": "{:>999999999}"}),
        ("{{ f.format_map({}) }}", {"f": "{x:>999999999}"}),
        ("{{ t | replace('a', b) }}", {"t": "a" * 10_000, "b": "x" * 10_000}),
        ("{{ t.replace('a', b) }}", {"t": "a" * 10_000, "b": "x" * 10_000}),
    ],
)
def test_formats_and_replacements_that_would_blow_up_are_refused_before(
    source: str, arguments: dict[str, object]
) -> None:
    template = InstructionTemplate(source, owner="helper")
    with pytest.raises(ConfigurationError, match="rendering limit: the rendering would"):
        template.render(arguments)


def test_ordinary_formats_and_replacements_still_render() -> None:
    source = "{{ '%5d' % 3 }}|{{ '{:>4}'.format(1) }}|"
    source += "{{ 'ab' | replace('a', 'c') }}|{{ '%d' | format(7) }}"
    assert InstructionTemplate(source).render({}) == "    3|   1|cb|7"


async def test_an_override_keeps_the_limits_of_the_agents_template() -> None:
    from cantata.agents import ChatAgent
    from cantata.models import ScriptedChatClient

    template = InstructionTemplate("Be brief.", owner="a", max_chars=5)
    agent = ChatAgent(ScriptedChatClient(["never"]), name="a", instructions=template)
    with pytest.raises(ConfigurationError, match="5 characters"):
        await agent.run("x", instructions_override="{{ 'long' * 3 }}")
