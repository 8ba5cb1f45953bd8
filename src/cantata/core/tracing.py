"""OpenTelemetry spans, off unless configured: `configure(tracer_provider)` turns them on.

Layers open spans with `span(name, attributes)`; while tracing is off it is a shared no-op
context manager (one global read), so an untraced run pays nothing else. Names and
attributes follow the OpenTelemetry GenAI semantic conventions where they define one:

- ``invoke_agent {name}`` around every agent's `run` and `run_stream` (``gen_ai.agent.*``,
  ``gen_ai.conversation.id``, summed token usage), parent of the run's model and tool spans;
- ``chat {model}`` per model call and ``execute_tool {name}`` per tool call;
- ``workflow {name}``, ``superstep {n}`` and ``executor {id}`` (``cantata.*`` attributes);
- runtime messages, after the messaging conventions: ``send {agent type}`` or ``publish
  {topic type}`` at the sender and ``process {agent type}`` around the handler, with
  ``cantata.message.id``, ``cantata.correlation_id`` and ``cantata.causation_id``.

A message carries its sender's span as a W3C ``traceparent`` string in its envelope
(`MessageContext.trace_context`), not in a global, so the handler's span joins the
sender's trace on any runtime: a direct request's handler span is the send span's child;
a published event's handler span is the publish span's child and also links to it (the
messaging conventions' link to the creation context). Needs the ``otel`` extra.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from contextvars import Context
from typing import Any, Literal, TypeAlias

from .errors import ConfigurationError

__all__ = [
    "SpanKind",
    "activate",
    "configure",
    "current_span",
    "deactivate",
    "enabled",
    "end_span",
    "span",
    "start_span",
    "traceparent",
]

SpanKind: TypeAlias = Literal["internal", "client", "server", "producer", "consumer"]
"""The OpenTelemetry span kind, by name."""

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


def span(
    name: str, attributes: Mapping[str, Any] | None = None, *, kind: SpanKind = "internal"
) -> Any:
    """A context manager for a span named `name`, current inside it (a no-op while tracing
    is off); an exception leaving it is recorded on the span and marks it as an error."""
    tracer = _tracer
    if tracer is None:
        return _OFF
    return _span(tracer, name, attributes, kind)


@contextlib.contextmanager
def _span(
    tracer: Any, name: str, attributes: Mapping[str, Any] | None, kind: SpanKind
) -> Iterator[Any]:
    with tracer.start_as_current_span(name, attributes=_clean(attributes), kind=_kind(kind)) as s:
        yield s


def start_span(
    name: str,
    attributes: Mapping[str, Any] | None = None,
    *,
    kind: SpanKind = "internal",
    parent: str | None = None,
    links: Sequence[str] = (),
) -> Any:
    """Start a span that is not current anywhere yet (see `activate`), for work that does
    not fit one ``with`` block: a stream, a handler stepped by the runtime. None while
    tracing is off.

    `parent` is a W3C traceparent (from `traceparent`): the span joins that trace as its
    child; without one it is a child of the current span. `links` are traceparents the
    span links to. End it with `end_span`."""
    tracer = _tracer
    if tracer is None:
        return None
    from opentelemetry import trace

    context = None if parent is None else _extract(parent)
    found = [trace.Link(_span_context(tp)) for tp in links]
    return tracer.start_span(
        name,
        context=context,
        kind=_kind(kind),
        attributes=_clean(attributes),
        links=[link for link in found if link.context.is_valid],
    )


def activate(span: Any, context: Context | None = None) -> Any:
    """Make `span` the current span inside `context` (a `contextvars.Context` the caller
    runs code in, and throws away after: nothing to undo), or in the current context when
    None: then the returned token goes to `deactivate`."""
    from opentelemetry import context as otel
    from opentelemetry import trace

    value = trace.set_span_in_context(span)
    if context is None:
        return otel.attach(value)
    return context.run(otel.attach, value)


def deactivate(token: Any) -> None:
    """Undo an `activate` in the current context."""
    from opentelemetry import context as otel

    otel.detach(token)


def end_span(span: Any, error: BaseException | None = None) -> None:
    """End `span`; an `Exception` is recorded on it and marks it as an error (a
    cancellation or a closed generator is not a failure, only the end of the span)."""
    if isinstance(error, Exception):
        from opentelemetry.trace import Status, StatusCode

        span.record_exception(error)
        span.set_attribute("error.type", type(error).__qualname__)
        span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"))
    span.end()


def current_span() -> Any:
    """The current span (OpenTelemetry's invalid span outside any); None while off."""
    if _tracer is None:
        return None
    from opentelemetry import trace

    return trace.get_current_span()


def traceparent(span: Any = None) -> str | None:
    """The W3C traceparent of `span` (the current span when None), to carry to another
    process or task in an envelope; None while tracing is off or without a valid span."""
    if _tracer is None:
        return None
    from opentelemetry import trace

    found = span if span is not None else trace.get_current_span()
    ctx = found.get_span_context()
    if not ctx.is_valid:
        return None
    return f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{int(ctx.trace_flags):02x}"


def _span_context(traceparent: str) -> Any:
    from opentelemetry import trace

    return trace.get_current_span(_extract(traceparent)).get_span_context()


def _extract(traceparent: str) -> Any:
    """The OpenTelemetry context whose (remote) span is `traceparent`'s; an empty context
    for a malformed one, so a bad envelope starts a new trace instead of failing."""
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    return TraceContextTextMapPropagator().extract({"traceparent": traceparent})


def _kind(kind: SpanKind) -> Any:
    from opentelemetry.trace import SpanKind as Kind

    try:
        return Kind[kind.upper()]
    except KeyError:
        raise ConfigurationError(
            f"span kind {kind!r} is not one of internal, client, server, producer, consumer"
        ) from None


def _clean(attributes: Mapping[str, Any] | None) -> dict[str, Any]:
    return {k: v for k, v in (attributes or {}).items() if v is not None}
