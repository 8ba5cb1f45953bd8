"""The options that load a spec, shared by `cantata run` and `cantata serve spec.yaml`."""

from __future__ import annotations

from typing import Annotated

import typer

__all__ = ["AllowOption", "SettingOption", "parse_settings"]

SettingOption = Annotated[
    list[str] | None,
    typer.Option("--setting", help="key=value for ${Settings:key} placeholders."),
]
AllowOption = Annotated[
    list[str] | None,
    typer.Option("--allow", help="Import path whose functions the spec may use as tools."),
]


def parse_settings(pairs: list[str]) -> dict[str, str]:
    """The ``--setting key=value`` pairs as settings for ``${Settings:key}``."""
    from ..core import UsageError

    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"--setting {pair!r} must be key=value")
        out[key] = value
    return out
