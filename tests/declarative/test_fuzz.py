"""Hypothesis: malformed specs and configs give typed errors only, import nothing that is
not allowed, and end (deep nesting is refused, not recursed into)."""

from __future__ import annotations

import contextlib
import sys
from typing import Any

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from cantata.core import CantataError
from cantata.declarative import from_config, load, registered_providers

from .test_load import AGENT, ROUND_ROBIN

_SCALARS = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20)
_JSON = st.recursive(
    _SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=20,
)
_FOREIGN = ["calendar.TextCalendar", "os.system", "subprocess.run", "shutil.rmtree", "x.y"]
_PROVIDERS = st.sampled_from(registered_providers() + _FOREIGN) | st.text(max_size=30)
_KEYS = st.sampled_from(
    ["name", "type", "version", "model", "tools", "instructions", "inputs", "participants",
     "termination", "speaker", "options", "connection", "api", "id", "script", "max_turns",
     "start", "executors", "edges", "handoffs", "manager", "protocol", "url", "token",
     "store", "timeout"]
)  # fmt: skip
_PLACEHOLDERS = st.sampled_from(["${Env:NOPE}", "${Settings:x}", "${Foo:bar}", "${Env:HOME}"])


def _loads_quietly(source: Any, **kwargs: Any) -> None:
    before = set(sys.modules)
    with contextlib.suppress(CantataError):
        load(source, env={"HOME": "/h"}, **kwargs)
    new = {m for m in set(sys.modules) - before if not m.startswith(("cantata", "jinja2"))}
    assert not new & {"calendar", "subprocess", "shutil"}, new


@given(st.text(max_size=300))
def test_any_text(text: str) -> None:
    _loads_quietly(text)


def _mutate(base: dict[str, Any], data: st.DataObject) -> dict[str, Any]:
    spec = dict(base)
    for _ in range(data.draw(st.integers(1, 4))):
        key = data.draw(_KEYS)
        spec[key] = data.draw(_JSON | _PLACEHOLDERS)
    return spec


WORKFLOW = """
version: 1
type: workflow
name: w
start: a
executors:
  - {name: a, model: {api: scripted}}
  - {name: b, model: {api: scripted}}
edges:
  - {from: a, switch: [{when: {contains: x}, to: b}, {default: b}]}
"""


REMOTE = """
version: 1
type: remote_agent
name: far
protocol: responses
url: http://127.0.0.1:9/v1
model: echo
token: ${Env:HOME}
"""


@given(st.data(), st.sampled_from([AGENT, ROUND_ROBIN, WORKFLOW, REMOTE]))
def test_mutated_specs(data: st.DataObject, base: str) -> None:
    spec = _mutate(yaml.safe_load(base), data)
    _loads_quietly(spec, tools=[len], settings={"x": 1})


@given(st.data())
def test_mutated_nested_blocks(data: st.DataObject) -> None:
    spec = yaml.safe_load(AGENT)
    block = data.draw(st.sampled_from(["model", "inputs"]))
    spec[block] = _mutate(spec[block] if isinstance(spec[block], dict) else {}, data)
    _loads_quietly(spec, settings={"topic": "t"})


@given(_PROVIDERS, st.sampled_from(["model", "tool", "x", 3]), _JSON, _JSON)
def test_any_component_config(provider: str, kind: Any, version: Any, config: Any) -> None:
    before = set(sys.modules)
    data = {"provider": provider, "component_type": kind, "version": version, "config": config}
    for candidate in (data, {**data, "version": 1}):
        with contextlib.suppress(CantataError):
            from_config(candidate, env={})
    assert not (set(sys.modules) - before) & {"calendar", "subprocess", "shutil"}


@settings(max_examples=20)
@given(st.integers(65, 5000), st.sampled_from(["[", "{a: "]))
def test_deep_nesting_is_refused(depth: int, opener: str) -> None:
    closer = "]" if opener == "[" else "}"
    text = "version: 1\ntype: chat_agent\nname: x\ninputs: " + opener * depth + closer * depth
    _loads_quietly(text)
    nested: Any = "v"
    for _ in range(depth):
        nested = [nested]
    _loads_quietly({"version": 1, "type": "chat_agent", "name": "x", "outputs": {"a": nested}})
    with contextlib.suppress(CantataError):
        from_config({"provider": "cantata.teams.RoundRobin", "config": {"a": nested}}, env={})
