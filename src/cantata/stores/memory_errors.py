"""Errors of the item stores: mistakes of the caller, each naming what to change."""

from __future__ import annotations

from ..core import UsageError

__all__ = ["FilterError", "NamespaceError", "VectorSizeError"]


class VectorSizeError(UsageError):
    """A vector's length differs from the store's dimensions (or it cannot be normalized).

    The store keeps one size for all its vectors, fixed by its `dimensions` option or by
    the first vector written; embed with the same model, or use another store.
    """


class FilterError(UsageError):
    """A metadata filter names an operator the store does not know, or a bad operand."""


class NamespaceError(UsageError):
    """A namespace is not a tuple of non-empty strings the store can keep."""
