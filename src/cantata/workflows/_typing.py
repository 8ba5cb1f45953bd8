"""Runtime checks of values and types against annotations (Any, unions, generics).

Handlers are chosen by the type of the message, and `build()` checks that what a source
sends can be taken by its targets. Both need the same small rules, written once here.
"""

from __future__ import annotations

import sys
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, TypeVar, get_args, get_origin

from ..core import ConfigurationError

__all__ = ["accepts_value", "could_accept", "is_plain_class", "type_name"]

_UNION_TYPES: tuple[Any, ...] = (typing.Union, types.UnionType)


def _is_union(tp: Any) -> bool:
    return get_origin(tp) in _UNION_TYPES


def _unwrap(tp: Any) -> Any:
    """Strip Annotated, NewType, TypeVar (to its bound or Any) and Literal (to its values' type)."""
    origin = get_origin(tp)
    if origin is typing.Annotated:
        return _unwrap(get_args(tp)[0])
    if isinstance(tp, TypeVar):
        if tp.__bound__ is not None:
            return _unwrap(tp.__bound__)
        if tp.__constraints__:
            return typing.Union[tuple(tp.__constraints__)]  # noqa: UP007
        return Any
    supertype = getattr(tp, "__supertype__", None)
    if supertype is not None:
        return _unwrap(supertype)
    return tp


def is_plain_class(tp: Any) -> bool:
    """True for a bare class: an `isinstance` check is enough and results can be cached."""
    return isinstance(tp, type) and get_origin(tp) is None


def accepts_value(tp: Any, value: Any) -> bool:
    """Whether `value` fits the annotation `tp` (checks element types of lists and dicts)."""
    if type(tp) is type:
        return isinstance(value, tp)
    tp = _unwrap(tp)
    if tp is Any or tp is object:
        return True
    if tp is None or tp is type(None):
        return value is None
    if _is_union(tp):
        return any(accepts_value(arg, value) for arg in get_args(tp))
    origin = get_origin(tp)
    if origin is None:
        return isinstance(tp, type) and isinstance(value, tp)
    if origin is typing.Literal:
        return value in get_args(tp)
    if not isinstance(origin, type) or not isinstance(value, origin):
        return False
    args = get_args(tp)
    if not args:
        return True
    if isinstance(value, Mapping) and len(args) == 2:
        return all(
            accepts_value(args[0], k) and accepts_value(args[1], v) for k, v in value.items()
        )
    if isinstance(value, tuple) and origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return all(accepts_value(args[0], v) for v in value)
        return len(args) == len(value) and all(map(accepts_value, args, value))
    if isinstance(value, list | set | frozenset) and len(args) == 1:
        item = args[0]
        if type(item) is type:
            return all(isinstance(v, item) for v in value)
        return all(accepts_value(item, v) for v in value)
    return True


def could_accept(target: Any, source: Any) -> bool:
    """Whether some value of annotation `source` may be taken by annotation `target`.

    Generous on purpose: `build()` must reject only edges that can never carry a message,
    so `Any`, unions, unbound generics and type variables all pass.
    """
    target, source = _unwrap(target), _unwrap(source)
    if target is Any or source is Any or target is object:
        return True
    if _is_union(source):
        return any(could_accept(target, s) for s in get_args(source))
    if _is_union(target):
        return any(could_accept(t, source) for t in get_args(target))
    if target is None or target is type(None) or source is None or source is type(None):
        return (target in (None, type(None))) and (source in (None, type(None)))
    t_origin, s_origin = get_origin(target) or target, get_origin(source) or source
    if t_origin is typing.Literal or s_origin is typing.Literal:
        return True
    if not isinstance(t_origin, type) or not isinstance(s_origin, type):
        return True
    if not (issubclass(s_origin, t_origin) or issubclass(t_origin, s_origin)):
        return False
    t_args, s_args = get_args(target), get_args(source)
    if not t_args or not s_args or len(t_args) != len(s_args):
        return True
    return all(could_accept(t, s) for t, s in zip(t_args, s_args, strict=True))


def type_name(tp: Any) -> str:
    """A readable name for an annotation, for error messages."""
    if tp is Any:
        return "Any"
    if isinstance(tp, type) and get_origin(tp) is None:
        return tp.__qualname__
    return repr(tp).replace("typing.", "")


def names(types_: list[Any] | tuple[Any, ...]) -> str:
    """Readable, comma-separated names of several annotations."""
    return ", ".join(type_name(t) for t in types_) or "nothing"


def resolve_hints(fn: Callable[..., Any], *, depth: int = 2) -> dict[str, Any]:
    """Type hints of a function, resolved even under ``from __future__ import annotations``.

    Names that are not module globals (types defined inside a function, as tests do) are
    looked up in the frames of the caller that is making the executor.
    """
    try:
        return typing.get_type_hints(fn)
    except NameError as first:
        localns: dict[str, Any] = {}
        frame: types.FrameType | None = sys._getframe(depth)
        for _ in range(6):
            if frame is None:
                break
            localns = {**frame.f_locals, **localns}
            frame = frame.f_back
        try:
            return typing.get_type_hints(fn, localns=localns)
        except NameError:
            qual = getattr(fn, "__qualname__", repr(fn))
            raise ConfigurationError(
                f"cannot resolve the annotations of {qual}: {first}; define the type at module "
                "level or before the executor is created"
            ) from first
