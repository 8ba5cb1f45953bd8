"""The errors of evals: a dataset or report file that cannot be read, and an eval that
cannot start. A case whose run fails is not an error here: it is a failed case in the
report, so one bad case never hides the others."""

from __future__ import annotations

from ..core import ConfigurationError, SerializationError

__all__ = ["DatasetError", "ReportError"]


class DatasetError(ConfigurationError):
    """A dataset (YAML or JSONL) that cannot be read: the message names the file, the case
    (by line for JSONL) and the field, and says what was expected there."""

    path: str | None = None
    line: int | None = None


class ReportError(SerializationError):
    """An eval report file that cannot be read (not JSON, not a report, an unknown
    ``schema_version``)."""
