"""The error `build()` raises for a graph that cannot run as drawn, with structured fields.

A program that builds workflows from data (a spec, a UI) needs more than a message: which
executors and which types the problem is about, and what kind of problem it is, so it can
point at the right node or edge. `WorkflowValidationError` is a `ConfigurationError`, so
existing ``except ConfigurationError`` code keeps catching it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, TypeAlias

from ..core import ConfigurationError

__all__ = ["ValidationProblem", "WorkflowValidationError"]

ValidationProblem: TypeAlias = Literal[
    "no_handler",
    "incompatible_edge",
    "fan_in_type",
    "unreachable",
    "duplicate_edge",
    "unknown_output_executor",
]
"""What kind of mistake a `WorkflowValidationError` reports."""


class WorkflowValidationError(ConfigurationError):
    """A workflow graph is invalid; `problem`, `executor_ids` and `types` say where.

    `executor_ids` lists the executors involved (an edge's source first, then its target);
    `types` the annotations involved (for a type mismatch: what is sent, then what is taken).
    """

    problem: ValidationProblem
    executor_ids: tuple[str, ...]
    types: tuple[Any, ...]

    def __init__(
        self,
        message: str,
        *,
        problem: ValidationProblem,
        executor_ids: Sequence[str] = (),
        types: Sequence[Any] = (),
    ) -> None:
        # keyword fields of CantataError: attributes, and all of them in `fields`
        super().__init__(
            message, problem=problem, executor_ids=tuple(executor_ids), types=tuple(types)
        )
