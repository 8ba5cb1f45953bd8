"""Guardrails and usage limits as plain data, for a chat agent's config and spec.

A guardrail is ``{"kind": ..., ...}``: ``pii`` (action, kinds, on), ``injection`` (on,
mode), ``length`` (max_chars, min_chars, action, on), ``schema`` (schema, on), ``policy``
(policy, on, mode: judged by the agent's own model) or ``function`` (function: an import
path the loader allows, name, on, mode); in YAML quote "on" (a bare on is read as true).
Usage limits are `UsageLimits`' fields, prices as ``{model: {input, output, cached_input}}``.
A built agent keeps the data it was built from, so its config dumps back; guardrails made
in code have none, and refuse to dump.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from ..agents import (
    Guardrail,
    ModelPrice,
    UsageLimits,
    injection_guardrail,
    length_guardrail,
    pii_guardrail,
    policy_guardrail,
    schema_guardrail,
)
from ..core import ConfigurationError
from ._builtin_functions import _function
from .errors import SpecError
from .registry import ConfigContext

DATA_ATTR = "_cantata_guardrail_data"

_KINDS: dict[str, set[str]] = {
    "pii": {"action", "kinds", "on", "name"},
    "injection": {"on", "mode", "name"},
    "length": {"max_chars", "min_chars", "action", "on", "name"},
    "schema": {"schema", "on", "name"},
    "policy": {"policy", "on", "mode", "name"},
    "function": {"function", "on", "mode", "name"},
}


def guardrails_from_data(
    data: Any, ctx: ConfigContext, *, client: Any, where: str
) -> list[Guardrail]:
    """Guardrails from their data (see the module docstring)."""
    if not isinstance(data, list):
        raise SpecError(f"{where}: 'guardrails' must be a list of guardrails")
    return [_one(item, ctx, client, f"{where}.guardrails[{i}]") for i, item in enumerate(data)]


def _one(item: Any, ctx: ConfigContext, client: Any, where: str) -> Guardrail:
    if not isinstance(item, Mapping) or item.get("kind") not in _KINDS:
        raise SpecError(f"{where}: a guardrail is a mapping with 'kind' one of {sorted(_KINDS)}")
    kind = item["kind"]
    args = {k: v for k, v in item.items() if k != "kind"}
    unknown = sorted(set(args) - _KINDS[kind])
    if unknown:
        raise SpecError(f"{where}: unknown field(s) {unknown} for a {kind} guardrail")
    if isinstance(args.get("on"), list):
        args["on"] = tuple(args["on"])
    try:
        if kind == "pii":
            return pii_guardrail(**args)
        if kind == "injection":
            return injection_guardrail(**args)
        if kind == "length":
            return length_guardrail(**args)
        if kind == "schema":
            return schema_guardrail(**args)
        if kind == "policy":
            return policy_guardrail(client, **args)
        fn = _function(args.pop("function", None), ctx, where)
        return Guardrail(fn, **args)
    except (ConfigurationError, TypeError) as exc:
        raise SpecError(f"{where}: {exc}") from exc


def limits_from_data(data: Any, *, where: str) -> list[UsageLimits]:
    """Usage limits from a mapping of `UsageLimits` fields, or a list of them."""
    items = data if isinstance(data, list) else [data]
    out = []
    names = {f.name for f in dataclasses.fields(UsageLimits)}
    for i, item in enumerate(items):
        at = f"{where}.usage_limits[{i}]"
        if not isinstance(item, Mapping) or set(item) - names:
            raise SpecError(f"{at}: usage limits are a mapping of some of {sorted(names)}")
        args = dict(item)
        prices = args.pop("prices", {}) or {}
        try:
            table = {str(model): ModelPrice(**price) for model, price in dict(prices).items()}
            out.append(UsageLimits(prices=table, **args))
        except (ConfigurationError, TypeError, ValueError) as exc:
            raise SpecError(f"{at}: {exc}") from exc
    return out


def limits_to_data(limits: tuple[UsageLimits, ...]) -> list[dict[str, Any]]:
    """`limits` as data (`limits_from_data` reads it back)."""
    out = []
    for limit in limits:
        data = {
            f.name: getattr(limit, f.name)
            for f in dataclasses.fields(limit)
            if f.name != "prices" and getattr(limit, f.name) is not None
        }
        if limit.prices:
            data["prices"] = {m: dataclasses.asdict(p) for m, p in limit.prices.items()}
        out.append(data)
    return out
