"""Datasets of cases, read from YAML or JSONL and checked before anything runs.

YAML holds a whole dataset (a name, evaluators for every case, the cases); JSONL holds one
case per line, so a file of recorded traffic can grow by appending. Every case has an
`input`, and may have an `expected` output, `metadata` (kept in the report) and evaluators
of its own. A file that cannot be read raises `DatasetError` naming the file, the case (its
line, for JSONL) and the field, before any case runs.

An evaluator is written ``kind`` (``- exact``) or ``kind: argument`` (``- contains: Paris``)
or ``kind: {field: value, ...}``. YAML aliases are refused: a few lines of nested aliases
expand to gigabytes (a dataset is data, and needs none).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError, field_validator

from ..core import CantataError, check_json_depth, loads_json
from .context import Case, Evaluator
from .errors import DatasetError
from .evaluators import BUILTIN_KINDS, BuiltinEvaluator
from .judge import Judge

__all__ = [
    "EVALUATOR_KINDS",
    "MAX_DATASET_BYTES",
    "Dataset",
    "load_dataset",
    "parse_evaluator",
]

MAX_DATASET_BYTES = 64_000_000
"""Largest dataset file read."""
_MAX_DEPTH = 64

EVALUATOR_KINDS: Mapping[str, type[BuiltinEvaluator]] = {**BUILTIN_KINDS, Judge.kind: Judge}
"""Every evaluator a dataset file can name, by its kind."""


class _CaseSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str | None = Field(default=None, min_length=1, max_length=200)
    input: JsonValue
    expected: JsonValue = None
    metadata: dict[str, JsonValue] = Field(default_factory=dict)
    evaluators: list[JsonValue] = Field(default_factory=list)

    @field_validator("input")
    @classmethod
    def _has_input(cls, value: JsonValue) -> JsonValue:
        if value is None or value == "":
            raise ValueError("a case needs an input")
        return value


class _DatasetSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str | None = Field(default=None, min_length=1, max_length=200)
    evaluators: list[JsonValue] = Field(default_factory=list)
    cases: list[JsonValue] = Field(min_length=1)


def _field_error(exc: ValidationError, prefix: str) -> str:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"])
    more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return f"{prefix}{where or 'it'}: {first['msg']}{more}"


def parse_evaluator(spec: Any, *, where: str = "evaluator") -> BuiltinEvaluator:
    """An evaluator from its written form: ``"exact"``, ``{"contains": "Paris"}`` or
    ``{"regex": {"pattern": "...", "ignore_case": true}}``; `where` names it in errors."""
    if isinstance(spec, str):
        kind, args = spec, None
    elif isinstance(spec, Mapping) and len(spec) == 1:
        ((kind, args),) = spec.items()
    else:
        raise DatasetError(
            f"{where}: write an evaluator as a kind ('exact') or one kind with its argument "
            f"({{contains: Paris}}), got {_shown(spec)}"
        )
    cls = EVALUATOR_KINDS.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise DatasetError(
            f"{where}: unknown evaluator {_shown(kind)}; known: {sorted(EVALUATOR_KINDS)}"
        )
    if args is None:
        data: Any = {}
    elif isinstance(args, Mapping) and not (cls.takes_mapping and set(args) != {"schema"}):
        data = dict(args)
    elif cls.primary is not None:
        data = {cls.primary: args}
    else:
        raise DatasetError(f"{where}: {kind} takes a mapping of its fields, got {_shown(args)}")
    try:
        return cls.model_validate(data)
    except ValidationError as exc:
        raise DatasetError(_field_error(exc, f"{where} ({kind}): ")) from None


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


@dataclass(frozen=True, slots=True)
class Dataset:
    """Cases and the evaluators that judge every one of them (each case may add its own).

    Build one in code (``Dataset([Case(...)], evaluators=[Contains(...)])``) or read a file
    with `load_dataset` / `Dataset.from_yaml` / `Dataset.from_jsonl`.
    """

    cases: tuple[Case, ...]
    evaluators: tuple[Evaluator, ...] = ()
    name: str = "dataset"
    path: str | None = field(default=None, compare=False)

    def __init__(
        self,
        cases: Iterable[Case],
        *,
        evaluators: Iterable[Evaluator] = (),
        name: str = "dataset",
        path: str | None = None,
    ) -> None:
        cases = tuple(cases)
        seen: set[str] = set()
        where = f"dataset {path!r}: " if path else ""
        for case in cases:
            if not isinstance(case, Case):
                raise DatasetError(f"a dataset holds Case objects, got {_shown(case)}")
            if case.name in seen:
                raise DatasetError(
                    f"{where}two cases are named {case.name!r}; names must differ (a report "
                    "compares cases by name)",
                    path=path,
                )
            seen.add(case.name)
        evaluators = tuple(evaluators)
        for e in evaluators:
            if not isinstance(e, Evaluator):
                raise DatasetError(
                    f"{_shown(e)} is not an evaluator (it needs a name and evaluate(ctx))"
                )
        object.__setattr__(self, "cases", cases)
        object.__setattr__(self, "evaluators", evaluators)
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "path", path)

    def __len__(self) -> int:
        return len(self.cases)

    @classmethod
    def from_yaml(cls, text: str, *, path: str | None = None) -> Dataset:
        """A dataset from YAML text: a mapping with `cases` (and `name`, `evaluators`), or
        a bare list of cases."""
        where = f"dataset {path!r}" if path else "the dataset"
        _check_nesting(text, where, path)
        try:
            data = yaml.load(text, Loader=_NoAliasLoader)
        except yaml.YAMLError as exc:
            raise DatasetError(f"{where} is not valid YAML: {str(exc)[:300]}", path=path) from None
        except RecursionError:
            raise DatasetError(f"{where} is nested too deeply to read", path=path) from None
        return cls._from_data(data, where, path)

    @classmethod
    def from_json(cls, text: str, *, path: str | None = None) -> Dataset:
        """A dataset from JSON text, shaped as for `from_yaml`."""
        where = f"dataset {path!r}" if path else "the dataset"
        try:
            data = loads_json(text, max_depth=_MAX_DEPTH, allow_nan=False)
        except CantataError as exc:
            raise DatasetError(f"{where} is not valid JSON: {exc}", path=path) from None
        return cls._from_data(data, where, path)

    @classmethod
    def _from_data(cls, data: Any, where: str, path: str | None) -> Dataset:
        if isinstance(data, list):
            data = {"cases": data}
        if not isinstance(data, dict):
            raise DatasetError(
                f"{where} must be a mapping with 'cases' (or a list of cases), "
                f"got {type(data).__name__}",
                path=path,
            )
        try:
            check_json_depth(data, max_depth=_MAX_DEPTH)
            spec = _DatasetSpec.model_validate(data)
        except CantataError as exc:
            raise DatasetError(f"{where}: {exc}", path=path) from None
        except ValidationError as exc:
            raise DatasetError(_field_error(exc, f"{where}: "), path=path) from None
        evaluators = [
            parse_evaluator(e, where=f"{where}: evaluators.{n}")
            for n, e in enumerate(spec.evaluators)
        ]
        cases = [
            _case(raw, n, f"{where}: cases.{n}", path, None) for n, raw in enumerate(spec.cases)
        ]
        return cls(cases, evaluators=evaluators, name=spec.name or _stem(path), path=path)

    @classmethod
    def from_jsonl(
        cls,
        text: str,
        *,
        path: str | None = None,
        evaluators: Iterable[Evaluator] = (),
        name: str | None = None,
    ) -> Dataset:
        """A dataset from JSON Lines: one case object per line (blank lines skipped);
        `evaluators` judge every case."""
        where = f"dataset {path!r}" if path else "the dataset"
        cases: list[Case] = []
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                raw = loads_json(line, max_depth=_MAX_DEPTH, allow_nan=False)
            except CantataError as exc:
                raise DatasetError(
                    f"{where}, line {number}: not a JSON case: {exc}", path=path, line=number
                ) from None
            cases.append(_case(raw, len(cases), f"{where}, line {number}", path, number))
        if not cases:
            raise DatasetError(f"{where} holds no case", path=path)
        return cls(cases, evaluators=evaluators, name=name or _stem(path), path=path)

    def to_yaml(self) -> str:
        """The dataset as YAML, as `from_yaml` reads it (built-in evaluators only)."""
        data: dict[str, Any] = {"name": self.name}
        if self.evaluators:
            data["evaluators"] = [_written(e) for e in self.evaluators]
        data["cases"] = [_case_data(c) for c in self.cases]
        return yaml.safe_dump(data, sort_keys=False, allow_unicode=True)

    def to_jsonl(self) -> str:
        """The cases as JSON Lines, as `from_jsonl` reads them (the dataset's own
        evaluators are not written: JSONL has no place for them)."""
        return "".join(json.dumps(_case_data(c), ensure_ascii=False) + "\n" for c in self.cases)


def _stem(path: str | None) -> str:
    return Path(path).stem if path else "dataset"


def _case(raw: Any, index: int, where: str, path: str | None, line: int | None) -> Case:
    if not isinstance(raw, dict):
        raise DatasetError(
            f"{where}: a case must be a mapping with 'input', got {type(raw).__name__}",
            path=path,
            line=line,
        )
    try:
        spec = _CaseSpec.model_validate(raw)
    except ValidationError as exc:
        raise DatasetError(_field_error(exc, f"{where}: "), path=path, line=line) from None
    try:
        evaluators = tuple(
            parse_evaluator(e, where=f"{where}: evaluators.{n}")
            for n, e in enumerate(spec.evaluators)
        )
    except DatasetError as exc:
        raise DatasetError(str(exc), path=path, line=line) from None
    return Case(spec.name or f"case-{index + 1}", spec.input, spec.expected, spec.metadata,
                evaluators)  # fmt: skip


def _written(e: Evaluator) -> Any:
    if not isinstance(e, BuiltinEvaluator):
        raise DatasetError(
            f"evaluator {e.name!r} is code, not data: a dataset file can hold only the "
            "built-in evaluators; pass it to evaluate(..., evaluators=[...]) instead"
        )
    args = e.model_dump(mode="json", by_alias=True, exclude_defaults=True)
    return {e.kind: args} if args else e.kind


def _case_data(case: Case) -> dict[str, Any]:
    data: dict[str, Any] = {"name": case.name, "input": case.input}
    if case.expected is not None:
        data["expected"] = case.expected
    if case.metadata:
        data["metadata"] = dict(case.metadata)
    if case.evaluators:
        data["evaluators"] = [_written(e) for e in case.evaluators]
    return data


def load_dataset(
    path: str | Path, *, evaluators: Sequence[Evaluator] = (), name: str | None = None
) -> Dataset:
    """Read a dataset file: ``.jsonl`` as JSON Lines, ``.json`` as JSON, anything else
    (``.yaml``, ``.yml``) as YAML. `evaluators` are added to the file's own."""
    where = str(path)
    try:
        with Path(path).open("rb") as f:
            raw = f.read(MAX_DATASET_BYTES + 1)
    except OSError as exc:
        raise DatasetError(
            f"dataset {where!r} cannot be read: {exc.strerror}", path=where
        ) from None
    if len(raw) > MAX_DATASET_BYTES:
        raise DatasetError(
            f"dataset {where!r} is larger than {MAX_DATASET_BYTES} bytes", path=where
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DatasetError(
            f"dataset {where!r} is not UTF-8 text (byte {exc.start})", path=where
        ) from None
    if where.endswith(".jsonl"):
        return Dataset.from_jsonl(text, path=where, evaluators=evaluators, name=name)
    if where.endswith(".json"):
        dataset = Dataset.from_json(text, path=where)
    else:
        dataset = Dataset.from_yaml(text, path=where)
    return Dataset(
        dataset.cases,
        evaluators=[*dataset.evaluators, *evaluators],
        name=name or dataset.name,
        path=where,
    )


def _check_nesting(text: str, where: str, path: str | None) -> None:
    """Refuse deep ``[``/``{`` nesting before parsing (PyYAML recurses, slowly)."""
    depth = deepest = 0
    for ch in text:
        if ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth = max(0, depth - 1)
    if deepest > _MAX_DEPTH:
        raise DatasetError(f"{where} is nested more than {_MAX_DEPTH} levels deep", path=path)


class _NoAliasLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing aliases (``*name``)."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()  # type: ignore[no-untyped-call]
            raise yaml.composer.ComposerError(
                None, None, "aliases (*name) are not allowed in a dataset", event.start_mark
            )
        return super().compose_node(parent, index)
