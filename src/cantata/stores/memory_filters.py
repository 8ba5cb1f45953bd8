"""Metadata filters: parsed once, then matched in Python or compiled to SQL.

One meaning everywhere: a condition holds only for a field of the same JSON kind as its
operand (a number, a string, a bool, null), so ``{"n": {"$gt": 5}}`` never matches the
string ``"6"`` and ``{"flag": True}`` never matches the number 1, whichever backend runs
it. ``$ne`` and ``$nin`` also match an item that lacks the field.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from ..core import short_repr
from .memory_errors import FilterError

__all__ = ["Condition", "matches", "parse_filter", "postgres_where", "sqlite_where"]

Op = Literal["$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin"]
OPERATORS: tuple[Op, ...] = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin")
_RANGE = {"$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}
_MAX_INT = 2**63
_MAX_IN = 1_000

Scalar = str | int | float | bool | None


@dataclass(frozen=True, slots=True)
class Condition:
    """One field, one operator, one operand (a list of scalars for $in and $nin)."""

    path: tuple[str, ...]
    op: Op
    operand: Any


def parse_filter(filter: Mapping[str, Any] | None, *, store: str) -> list[Condition]:
    """The conditions of a filter (all must hold), or `FilterError` saying what is wrong."""
    if filter is None:
        return []
    if not isinstance(filter, Mapping):
        raise FilterError(
            f"{store}: a filter must be a dict of field to value or operators, got "
            f"{type(filter).__name__}"
        )
    found: list[Condition] = []
    for field, spec in filter.items():
        path = _path(field, store)
        if isinstance(spec, Mapping):
            if not spec:
                raise FilterError(f"{store}: the filter on {field!r} has no operator")
            for op, operand in spec.items():
                found.append(_condition(path, op, operand, field, store))
        else:
            found.append(_condition(path, "$eq", spec, field, store))
    return found


def _path(field: Any, store: str) -> tuple[str, ...]:
    if type(field) is not str or not field:
        raise FilterError(f"{store}: a filter field must be a non-empty str, got {field!r}")
    parts = tuple(field.split("."))
    for part in parts:
        if not part or any(c in part for c in '"\\\x00') or part.startswith("$"):
            raise FilterError(
                f"{store}: the filter field {short_repr(field)} is not a dotted path of "
                "names (no empty part, quote, backslash or leading '$')"
            )
    return parts


def _condition(path: tuple[str, ...], op: Any, operand: Any, field: str, store: str) -> Condition:
    if op not in OPERATORS:
        raise FilterError(
            f"{store}: unknown filter operator {short_repr(op)} on {field!r}; use one of "
            f"{', '.join(OPERATORS)}",
            operator=op,
        )
    if op in ("$in", "$nin"):
        if not isinstance(operand, list | tuple) or len(operand) > _MAX_IN:
            raise FilterError(
                f"{store}: {op} on {field!r} takes a list of at most {_MAX_IN} values, "
                f"got {short_repr(operand)}"
            )
        return Condition(path, op, tuple(_scalar(v, op, field, store) for v in operand))
    value = _scalar(operand, op, field, store)
    if op in _RANGE and (value is None or isinstance(value, bool)):
        raise FilterError(
            f"{store}: {op} on {field!r} compares numbers or strings, got {short_repr(value)}"
        )
    return Condition(path, op, value)


def _scalar(value: Any, op: str, field: str, store: str) -> Scalar:
    cls = type(value)
    if cls is int and abs(value) < _MAX_INT:
        return int(value)
    if cls is float and math.isfinite(value):
        return float(value)
    if cls in (str, bool, type(None)):
        return value  # type: ignore[no-any-return]
    raise FilterError(
        f"{store}: {op} on {field!r} takes a str, a finite number (an int within 64 bits), "
        f"a bool or None, got {short_repr(value)}"
    )


# -- matching in Python -----------------------------------------------------------------------

_MISSING = object()


def _kind(value: Any) -> str | None:
    cls = type(value)
    if cls is bool:
        return "bool"
    if cls is int or cls is float:
        return "number"
    if cls is str:
        return "string"
    if value is None:
        return "null"
    return None  # lists, objects: match no scalar condition


def _lookup(value: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    current: Any = value
    for part in path:
        if type(current) is not dict or part not in current:
            return _MISSING
        current = current[part]
    return current


def _equal(found: Any, operand: Scalar) -> bool:
    return found is not _MISSING and _kind(found) == _kind(operand) and found == operand


def _holds(found: Any, cond: Condition) -> bool:
    op = cond.op
    if op == "$eq":
        return _equal(found, cond.operand)
    if op == "$ne":
        return not _equal(found, cond.operand)
    if op == "$in":
        return any(_equal(found, v) for v in cond.operand)
    if op == "$nin":
        return not any(_equal(found, v) for v in cond.operand)
    if found is _MISSING or _kind(found) != _kind(cond.operand):
        return False
    if op == "$gt":
        return bool(found > cond.operand)
    if op == "$gte":
        return bool(found >= cond.operand)
    if op == "$lt":
        return bool(found < cond.operand)
    return bool(found <= cond.operand)


def matches(value: Mapping[str, Any], conditions: list[Condition]) -> bool:
    """True if every condition holds for `value`."""
    return all(_holds(_lookup(value, c.path), c) for c in conditions)


# -- SQLite (JSON1) ---------------------------------------------------------------------------

_SQLITE_KIND = {
    "number": "IN ('integer', 'real')",
    "string": "= 'text'",
    "bool": "IN ('true', 'false')",
    "null": "= 'null'",
}


def _sqlite_eq(column: str, jpath: str, operand: Scalar, params: list[Any]) -> str:
    kind = _kind(operand)
    if kind == "bool":
        return f"json_type({column}, '{jpath}') = '{'true' if operand else 'false'}'"
    if kind == "null":
        return f"json_type({column}, '{jpath}') = 'null'"
    params.append(operand)
    return (
        f"(json_type({column}, '{jpath}') {_SQLITE_KIND[kind or 'null']} "
        f"AND json_extract({column}, '{jpath}') = ?)"
    )


def sqlite_where(conditions: list[Condition], params: list[Any], column: str = "value") -> str:
    """A SQL condition (with ``?`` placeholders appended to `params`) for SQLite's JSON1."""
    clauses = []
    for cond in conditions:
        jpath = "$" + "".join(f'."{part}"' for part in cond.path).replace("'", "''")
        if cond.op == "$eq":
            clauses.append(_sqlite_eq(column, jpath, cond.operand, params))
        elif cond.op == "$ne":
            clauses.append(f"NOT COALESCE({_sqlite_eq(column, jpath, cond.operand, params)}, 0)")
        elif cond.op in ("$in", "$nin"):
            parts = [_sqlite_eq(column, jpath, v, params) for v in cond.operand]
            any_of = f"COALESCE(({' OR '.join(parts)}), 0)" if parts else "0"
            clauses.append(any_of if cond.op == "$in" else f"NOT {any_of}")
        else:
            kind = _SQLITE_KIND[_kind(cond.operand) or "null"]
            params.append(cond.operand)
            clauses.append(
                f"(json_type({column}, '{jpath}') {kind} "
                f"AND json_extract({column}, '{jpath}') {_RANGE[cond.op]} ?)"
            )
    return " AND ".join(clauses) if clauses else "1"


# -- PostgreSQL (jsonb) -----------------------------------------------------------------------

_PG_KIND = {"number": "number", "string": "string", "bool": "boolean", "null": "null"}


def _pg_eq(column: str, operand: Scalar, path: list[str], params: list[Any]) -> str:
    kind = _kind(operand)
    params.append(path)
    typed = f"jsonb_typeof({column} #> %s) = '{_PG_KIND[kind or 'null']}'"
    if kind == "null":
        return typed
    params.append(path)
    if kind == "bool":
        params.append("true" if operand else "false")
        return f"({typed} AND ({column} #>> %s) = %s)"
    if kind == "number":
        params.append(operand)
        return f"({typed} AND ({column} #>> %s)::numeric = %s::numeric)"
    params.append(operand)
    return f'({typed} AND ({column} #>> %s) COLLATE "C" = %s)'


def postgres_where(conditions: list[Condition], params: list[Any], column: str = "value") -> str:
    """A SQL condition (``%s`` placeholders appended to `params`) for PostgreSQL's jsonb."""
    clauses = []
    for cond in conditions:
        path = list(cond.path)
        if cond.op == "$eq":
            clauses.append(_pg_eq(column, cond.operand, path, params))
        elif cond.op == "$ne":
            clauses.append(f"NOT COALESCE({_pg_eq(column, cond.operand, path, params)}, false)")
        elif cond.op in ("$in", "$nin"):
            parts = [_pg_eq(column, v, path, params) for v in cond.operand]
            any_of = f"COALESCE(({' OR '.join(parts)}), false)" if parts else "false"
            clauses.append(any_of if cond.op == "$in" else f"NOT {any_of}")
        else:
            kind = _kind(cond.operand)
            cast = "::numeric" if kind == "number" else ' COLLATE "C"'
            right = "%s::numeric" if kind == "number" else "%s"
            params.extend([path, path, cond.operand])
            clauses.append(
                f"(jsonb_typeof({column} #> %s) = '{_PG_KIND[kind or 'null']}' "
                f"AND ({column} #>> %s){cast} {_RANGE[cond.op]} {right})"
            )
    return " AND ".join(clauses) if clauses else "true"
