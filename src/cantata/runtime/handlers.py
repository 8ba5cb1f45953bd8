"""Handler decorators and the per-class dispatch tables behind `RoutedAgent`.

Why tables: dispatch happens on every message, so each agent class keeps two dicts
(direct requests, broadcast events) keyed on the exact message type. A message whose type
is a subclass of a handled type is resolved once through its MRO and then cached in the
same dict, so the common case is a single dict lookup.

Routing by value: a handler may take `match=`, a predicate of (message, ctx). The handlers
of one type then form a chain, tried in order until one's `match` returns True; a type
with one handler and no predicate stays a plain function in the table, so `match=` costs
nothing where it is not used. Order: handlers of the most derived class first, and within
a class `@rpc`/`@event` before `@message_handler`, then the order of definition.
(autogen-core tries them in alphabetical order of the method names; definition order is
what a reader of the class sees.) When no handler's `match` accepts a message,
`RoutedAgent.on_unhandled_message` runs: `CantHandle` for a direct request, a log line for
a broadcast event, as in autogen-core.
"""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal, TypeVar, cast, get_args, get_origin, overload

from ..core import ConfigurationError

__all__ = ["HandlerKind", "Match", "event", "message_handler", "rpc"]

HandlerKind = Literal["any", "rpc", "event"]
F = TypeVar("F", bound=Callable[..., Awaitable[Any]])
Handler = Callable[[Any, Any, Any], Awaitable[Any]]
Table = dict[type, "Handler | None"]
Match = Callable[[Any, Any], bool]
"""A handler's routing predicate: called with (message, ctx), True to take the message."""

_MARK = "__cantata_handler__"
_MATCH = "__cantata_match__"
CHAIN = "__cantata_chain__"  # on a chooser: the names of the handlers it tries


def _is_async(func: object) -> bool:
    return inspect.iscoroutinefunction(func)


def _mark(func: F, kind: HandlerKind, decorator: str, match: Match | None) -> F:
    if not _is_async(func):
        raise ConfigurationError(
            f"@{decorator} handler {getattr(func, '__qualname__', func)!r} must be an "
            "'async def' method taking (self, message, ctx)"
        )
    setattr(func, _MARK, kind)
    setattr(func, _MATCH, match)
    return func


def _decorate(
    func: F | None, kind: HandlerKind, decorator: str, match: Match | None
) -> F | Callable[[F], F]:
    if match is not None and (not callable(match) or _is_async(match)):
        raise ConfigurationError(
            f"@{decorator}(match=...) takes a plain function (message, ctx) -> bool, not "
            f"{match!r}; a coroutine function would always count as a match"
        )
    if func is None:
        return lambda f: _mark(f, kind, decorator, match)
    return _mark(func, kind, decorator, match)


@overload
def message_handler(func: F, /) -> F: ...
@overload
def message_handler(*, match: Match | None = None) -> Callable[[F], F]: ...
def message_handler(func: F | None = None, /, *, match: Match | None = None) -> Any:
    """Handle messages of the annotated type, both direct requests and broadcast events.

    `match`: take only messages for which `match(message, ctx)` is True; the next handler
    of the type is tried otherwise (see the module docstring for the order).
    """
    return _decorate(func, "any", "message_handler", match)


@overload
def rpc(func: F, /) -> F: ...
@overload
def rpc(*, match: Match | None = None) -> Callable[[F], F]: ...
def rpc(func: F | None = None, /, *, match: Match | None = None) -> Any:
    """Handle only direct requests (`send_message`) of the annotated type; the result is
    returned to the sender. `match` as for `message_handler`."""
    return _decorate(func, "rpc", "rpc", match)


@overload
def event(func: F, /) -> F: ...
@overload
def event(*, match: Match | None = None) -> Callable[[F], F]: ...
def event(func: F | None = None, /, *, match: Match | None = None) -> Any:
    """Handle only broadcast events (`publish_message`) of the annotated type. `match` as
    for `message_handler`."""
    return _decorate(func, "event", "event", match)


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


@dataclass(frozen=True, slots=True)
class _Entry:
    func: Handler
    match: Match | None
    name: str
    kind: HandlerKind
    owner: type


def build_tables(cls: type) -> tuple[Table, Table]:
    """The (direct, event) dispatch tables of an agent class, with inherited handlers.

    A handler without `match` ends its type's chain: the most derived class overrides its
    bases, and two such handlers of one kind for one type in the same class are a mistake
    (`ConfigurationError`): the second could never run.
    """
    chains: dict[str, dict[type, list[_Entry]]] = {"rpc": {}, "event": {}}
    for klass in cls.__mro__:
        entries = [
            (name, attr)
            for name, attr in klass.__dict__.items()
            if getattr(attr, _MARK, None) is not None and getattr(cls, name, None) is attr
        ]
        # @rpc and @event before @message_handler in one class; stable: definition order.
        entries.sort(key=lambda e: getattr(e[1], _MARK) == "any")
        for name, func in entries:
            kind: HandlerKind = getattr(func, _MARK)
            handler = cast(Handler, func)
            entry = _Entry(handler, getattr(func, _MATCH, None), name, kind, klass)
            for message_type in message_types(handler, klass):
                for table_kind in ("rpc", "event"):
                    if kind in ("any", table_kind):
                        chain = chains[table_kind].setdefault(message_type, [])
                        _append(chain, entry, table_kind, message_type)
    return _table(chains["rpc"]), _table(chains["event"])


def _append(chain: list[_Entry], entry: _Entry, table_kind: str, message_type: type) -> None:
    last = chain[-1] if chain else None
    if last is None or last.match is not None:
        chain.append(entry)
    elif last.owner is entry.owner and last.kind == entry.kind:
        raise ConfigurationError(
            f"{entry.owner.__qualname__} has two {table_kind} handlers for "
            f"{message_type.__qualname__}: {last.name} and {entry.name}; keep one, or give "
            f"{last.name} a match= so that {entry.name} takes what it does not"
        )
    # else: overridden by a subclass's handler, or shadowed by a more specific kind


def _table(chains: dict[type, list[_Entry]]) -> Table:
    table: Table = {}
    for message_type, chain in chains.items():
        only = chain[0]
        table[message_type] = (
            only.func if len(chain) == 1 and only.match is None else _chooser(chain)
        )
    return table


def _chooser(chain: list[_Entry]) -> Handler:
    pairs = tuple((e.func, e.match) for e in chain)

    def choose(agent: Any, message: Any, ctx: Any) -> Awaitable[Any]:
        for func, match in pairs:
            if match is None or match(message, ctx):
                return func(agent, message, ctx)
        return cast(Awaitable[Any], agent.on_unhandled_message(message, ctx))

    setattr(choose, CHAIN, tuple(e.name for e in chain))
    return choose


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
