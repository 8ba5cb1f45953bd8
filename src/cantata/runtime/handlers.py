"""Handler decorators and the per-class dispatch tables behind `RoutedAgent`.

Why tables: dispatch happens on every message, so each agent class keeps two dicts
(direct requests, broadcast events) keyed on the exact message type. A message whose type
is a subclass of a handled type is resolved once through its MRO and then cached in the
same dict, so the common case is a single dict lookup.
"""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Awaitable, Callable
from typing import Any, Literal, TypeVar, cast, get_args, get_origin

from ..core import ConfigurationError

__all__ = ["HandlerKind", "event", "message_handler", "rpc"]

HandlerKind = Literal["any", "rpc", "event"]
F = TypeVar("F", bound=Callable[..., Awaitable[Any]])
Handler = Callable[[Any, Any, Any], Awaitable[Any]]
Table = dict[type, "Handler | None"]

_MARK = "__cantata_handler__"


def _is_async(func: object) -> bool:
    return inspect.iscoroutinefunction(func)


def _mark(func: F, kind: HandlerKind, decorator: str) -> F:
    if not _is_async(func):
        raise ConfigurationError(
            f"@{decorator} handler {getattr(func, '__qualname__', func)!r} must be an "
            "'async def' method taking (self, message, ctx)"
        )
    setattr(func, _MARK, kind)
    return func


def message_handler(func: F) -> F:
    """Handle messages of the annotated type, both direct requests and broadcast events."""
    return _mark(func, "any", "message_handler")


def rpc(func: F) -> F:
    """Handle only direct requests (`send_message`) of the annotated type; the result is
    returned to the sender."""
    return _mark(func, "rpc", "rpc")


def event(func: F) -> F:
    """Handle only broadcast events (`publish_message`) of the annotated type."""
    return _mark(func, "event", "event")


def _expand(annotation: Any) -> tuple[type, ...]:
    if annotation is Any:
        return (object,)
    origin = get_origin(annotation)
    if origin is typing.Union or origin is types.UnionType:
        found: list[type] = []
        for arg in get_args(annotation):
            found.extend(_expand(arg))
        return tuple(found)
    if annotation is None:
        return (type(None),)
    if origin is not None and isinstance(origin, type):
        return (origin,)
    if isinstance(annotation, type):
        return (annotation,)
    raise TypeError(f"{annotation!r} is not a class")


def message_types(func: Callable[..., Any], owner: type) -> tuple[type, ...]:
    """The message classes a handler takes, read from its `message` parameter annotation."""
    where = f"{owner.__qualname__}.{func.__name__}"
    params = list(inspect.signature(func).parameters.values())
    if len(params) != 3:
        raise ConfigurationError(
            f"handler {where} must take exactly (self, message, ctx), not {len(params)} parameters"
        )
    try:
        hints = typing.get_type_hints(func)
    except Exception as exc:
        raise ConfigurationError(
            f"cannot resolve the annotations of handler {where}: {exc}; define message "
            "types at module level before the agent class"
        ) from exc
    annotation = hints.get(params[1].name)
    if annotation is None:
        raise ConfigurationError(
            f"handler {where} needs a type annotation on {params[1].name!r}: the runtime "
            "routes messages by that type (use a union for several, Any for all)"
        )
    try:
        return _expand(annotation)
    except TypeError as exc:
        raise ConfigurationError(f"handler {where}: {exc}; annotate with classes") from exc


def build_tables(cls: type) -> tuple[Table, Table]:
    """The (direct, event) dispatch tables of an agent class, with inherited handlers.

    The most derived class wins; two handlers of one kind for one type in the same class
    are a mistake and raise `ConfigurationError`.
    """
    rpc_table: Table = {}
    event_table: Table = {}
    for klass in reversed(cls.__mro__):
        seen: dict[tuple[str, type], str] = {}
        # "any" first, so an @rpc or @event handler in the same class takes precedence.
        entries = [
            (name, attr)
            for name, attr in klass.__dict__.items()
            if getattr(attr, _MARK, None) is not None and getattr(cls, name, None) is attr
        ]
        entries.sort(key=lambda e: getattr(e[1], _MARK) != "any")
        for name, func in entries:
            kind: HandlerKind = getattr(func, _MARK)
            for message_type in message_types(cast(Callable[..., Any], func), klass):
                for table_kind, table in (("rpc", rpc_table), ("event", event_table)):
                    if kind not in ("any", table_kind):
                        continue
                    key = (table_kind, message_type)
                    if key in seen and getattr(klass.__dict__[seen[key]], _MARK) == kind:
                        raise ConfigurationError(
                            f"{klass.__qualname__} has two {table_kind} handlers for "
                            f"{message_type.__qualname__}: {seen[key]} and {name}; keep one"
                        )
                    seen[key] = name
                    table[message_type] = func
    return rpc_table, event_table


def resolve(table: Table, message_type: type) -> Handler | None:
    """Find the handler for a message type through its MRO, and cache the answer."""
    found: Handler | None = None
    for base in message_type.__mro__[1:]:
        handler = table.get(base)
        if handler is not None:
            found = handler
            break
    table[message_type] = found
    return found
