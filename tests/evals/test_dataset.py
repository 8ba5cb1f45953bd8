"""Datasets from YAML and JSONL: what a file may say, and the typed error for what it may
not (named file, case, line and field), fuzzed with Hypothesis."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cantata.evals import (
    Case,
    Contains,
    Dataset,
    DatasetError,
    Exact,
    JsonSchema,
    Judge,
    MaxLatency,
    Regex,
    Routing,
    Trajectory,
    evaluator,
    load_dataset,
    parse_evaluator,
)

YAML = """
name: capitals
evaluators:
  - exact
  - max_latency: 2
cases:
  - name: france
    input: What is the capital of France?
    expected: Paris
    metadata: {topic: geography, level: 1}
    evaluators:
      - contains: {text: [Par, is], ignore_case: true}
      - regex: "^P"
  - input:
      - {role: user, content: hi}
      - {role: assistant, content: hello}
      - {role: user, content: sum 1 2}
    expected: {sum: 3}
    evaluators:
      - json_schema: {type: object, required: [sum]}
      - trajectory: [add, {name: log, arguments: {level: info}}]
      - judge: the answer is a number
  - input: route me
    evaluators:
      - routing: {first: billing, speakers: [triage, billing]}
"""


def test_a_yaml_dataset_reads_whole(tmp_path: Path) -> None:
    path = tmp_path / "capitals.yaml"
    path.write_text(YAML)
    data = load_dataset(path, evaluators=[Contains(text="x")])
    assert data.name == "capitals" and len(data) == 3 and data.path == str(path)
    assert [type(e) for e in data.evaluators] == [Exact, MaxLatency, Contains]
    first, second, third = data.cases
    assert first == Case(
        "france",
        "What is the capital of France?",
        "Paris",
        {"topic": "geography", "level": 1},
        (Contains(text=["Par", "is"], ignore_case=True), Regex(pattern="^P")),
    )
    assert second.name == "case-2" and second.expected == {"sum": 3}
    schema, trajectory, judge = second.evaluators
    assert isinstance(schema, JsonSchema) and schema.schema_["required"] == ["sum"]
    assert isinstance(trajectory, Trajectory)
    assert [c.name for c in trajectory.calls] == ["add", "log"]
    assert trajectory.calls[1].arguments == {"level": "info"}
    assert isinstance(judge, Judge) and judge.rubric == "the answer is a number"
    assert third.evaluators == (Routing(first="billing", speakers=["triage", "billing"]),)


def test_jsonl_is_one_case_per_line_and_round_trips(tmp_path: Path) -> None:
    lines = [
        {"name": "a", "input": "one", "expected": "1", "evaluators": ["exact"]},
        {"input": {"n": 2}, "metadata": {"k": "v"}},
    ]
    path = tmp_path / "d.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n\n")
    data = load_dataset(path, evaluators=[Contains()])
    assert [c.name for c in data.cases] == ["a", "case-2"] and data.name == "d"
    assert data.cases[0].evaluators == (Exact(),)
    assert data.evaluators == (Contains(),)
    again = Dataset.from_jsonl(data.to_jsonl())
    assert again.cases == data.cases
    yaml_again = Dataset.from_yaml(data.to_yaml())
    assert yaml_again.cases == data.cases and yaml_again.evaluators == data.evaluators


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("cases: []", "cases: List should have at least 1 item"),
        ("cases: [{expected: x}]", "cases.0: input: Field required"),
        ("cases: [{input: ''}]", "a case needs an input"),
        ("cases: [{input: x, colour: red}]", "colour: Extra inputs are not permitted"),
        ("cases: [{input: x, evaluators: [nope]}]", "unknown evaluator 'nope'"),
        ("cases: [{input: x, evaluators: [{regex: '('}]}]", "not a valid regular expression"),
        ("cases: [{input: x, evaluators: [{json_schema: {type: 12}}]}]", "not a valid JSON Schema"),
        ("cases: [{input: x, evaluators: [{max_latency: -1}]}]", "greater than 0"),
        ("cases: [{input: x, evaluators: [max_usage]}]", "max_usage needs a bound"),
        ("cases: [{input: x, evaluators: [routing]}]", "routing expects"),
        ("cases: [{input: x, evaluators: [{exact: 1, contains: 2}]}]", "one kind with"),
        ("cases: [{input: x, evaluators: [{contains: {txt: a}}]}]", "txt: Extra inputs"),
        ("cases: [{name: a, input: x}, {name: a, input: y}]", "two cases are named 'a'"),
        ("a: &x [1]\nb: *x", "aliases (*name) are not allowed"),
        ("[" * 100 + "]" * 100, "nested more than 64 levels"),
        ("cases: {input: x", "not valid YAML"),
        ("42", "must be a mapping with 'cases'"),
    ],
)
def test_a_bad_yaml_file_is_a_dataset_error_that_names_the_place(text: str, says: str) -> None:
    with pytest.raises(DatasetError) as caught:
        Dataset.from_yaml(text, path="bad.yaml")
    assert says in str(caught.value)
    assert "'bad.yaml'" in str(caught.value) and caught.value.path == "bad.yaml"


def test_a_bad_jsonl_line_names_its_number(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"input": "ok"}\n\n{"input": "x", "evaluators": ["exakt"]}\n')
    with pytest.raises(DatasetError, match=r"line 3: evaluators.0: unknown evaluator 'exakt'") as e:
        load_dataset(path)
    assert e.value.line == 3
    with pytest.raises(DatasetError, match="line 1: not a JSON case"):
        Dataset.from_jsonl("{nope")
    with pytest.raises(DatasetError, match="holds no case"):
        Dataset.from_jsonl("\n \n")
    with pytest.raises(DatasetError, match="cannot be read"):
        load_dataset(tmp_path / "missing.yaml")
    (tmp_path / "latin.yaml").write_bytes(b"cases: [{input: caf\xe9}]")
    with pytest.raises(DatasetError, match="not UTF-8"):
        load_dataset(tmp_path / "latin.yaml")


def test_written_forms_of_an_evaluator() -> None:
    assert parse_evaluator("exact") == Exact()
    assert parse_evaluator({"exact": "Paris"}) == Exact(value="Paris")
    assert parse_evaluator({"contains": {"text": "a", "any": True}}).any_of  # type: ignore[attr-defined]
    assert parse_evaluator({"json_schema": {"schema": {"type": "string"}}}) == JsonSchema(
        schema={"type": "string"}
    )
    assert parse_evaluator({"trajectory": {"calls": ["a"], "order": "exact"}}) == Trajectory(
        calls=[{"name": "a"}],
        order="exact",  # type: ignore[list-item]
    )
    with pytest.raises(DatasetError, match=r"here \(trajectory\): order"):
        parse_evaluator({"trajectory": {"calls": ["a"], "order": "sideways"}}, where="here")


def test_a_dataset_in_code_checks_its_parts() -> None:
    @evaluator
    def short(ctx: object) -> bool:
        return True

    data = Dataset([Case("a", "x")], evaluators=[short])
    assert data.evaluators == (short,)
    with pytest.raises(DatasetError, match="not an evaluator"):
        Dataset([Case("a", "x")], evaluators=["exact"])  # type: ignore[list-item]
    with pytest.raises(DatasetError, match="holds Case objects"):
        Dataset(["x"])  # type: ignore[list-item]
    with pytest.raises(DatasetError, match="code, not data"):
        data.to_yaml()


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=10),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)


@given(st.text(max_size=300))
def test_any_yaml_text_is_a_dataset_or_a_dataset_error(text: str) -> None:
    with contextlib.suppress(DatasetError):
        Dataset.from_yaml(text)


@given(st.lists(_json, max_size=4))
def test_any_json_lines_are_a_dataset_or_a_dataset_error(values: list[object]) -> None:
    with contextlib.suppress(DatasetError):
        Dataset.from_jsonl("\n".join(json.dumps(v) for v in values))


@given(
    st.dictionaries(
        st.sampled_from(["input", "expected", "name", "metadata", "evaluators", "x"]), _json
    )
)
def test_any_case_mapping_is_a_case_or_a_dataset_error(case: dict[str, object]) -> None:
    readers = [
        (Dataset.from_json, json.dumps({"cases": [case]})),
        (Dataset.from_yaml, json.dumps({"cases": [case]}, ensure_ascii=False)),
    ]
    for read, text in readers:
        try:
            data = read(text)
        except DatasetError:
            continue
        assert data.cases[0].input == case["input"]
