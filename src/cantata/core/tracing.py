"""OpenTelemetry spans, off unless configured: `configure(tracer_provider)` turns them on.

Layers open spans with `span(name, attributes)`; while tracing is off it is a shared no-op
context manager (one global read), so an untraced run pays nothing else. Names and
attributes follow the OpenTelemetry GenAI semantic conventions where they define one
(``chat {model}``, ``execute_tool {name}``, ``gen_ai.*`` attributes); workflow runs,
supersteps and executors use ``cantata.*`` attributes. Needs the ``otel`` extra.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any

from .errors import ConfigurationError

__all__ = ["configure", "enabled", "span"]

_tracer: Any = None
_OFF: contextlib.nullcontext[None] = contextlib.nullcontext()


def configure(tracer_provider: Any = None) -> None:
    """Emit spans through `tracer_provider` (the global one when None); ``configure(False)``
    turns tracing off again."""
    global _tracer
    if tracer_provider is False:
        _tracer = None
        return
    try:
        from opentelemetry import trace
    except ImportError as exc:
        raise ConfigurationError(
            "tracing needs OpenTelemetry: pip install 'cantata[otel]'"
        ) from exc
    _tracer = trace.get_tracer("cantata", tracer_provider=tracer_provider)


def enabled() -> bool:
    """Whether spans are emitted."""
    return _tracer is not None


def span(name: str, attributes: Mapping[str, Any] | None = None) -> Any:
    """A context manager for a span named `name` (a no-op while tracing is off); an
    exception leaving it is recorded on the span and marks it as an error."""
    tracer = _tracer
    if tracer is None:
        return _OFF
    return _span(tracer, name, attributes)


@contextlib.contextmanager
def _span(tracer: Any, name: str, attributes: Mapping[str, Any] | None) -> Iterator[Any]:
    clean = {k: v for k, v in (attributes or {}).items() if v is not None}
    with tracer.start_as_current_span(name, attributes=clean) as current:
        yield current
