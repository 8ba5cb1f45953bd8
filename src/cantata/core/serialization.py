"""The JSON type registry that every serializer in cantata writes through.

Why a registry and not pickle: persisted threads, checkpoints and runtime state must be
readable by another process, another version and a person, and loading them must never
run arbitrary code. Every value is written as plain JSON; a value of a registered type is
a JSON object tagged with ``"$type"``. Reading a tag that is not registered, or data that
does not fit the type, raises a `SerializationError` and loads nothing.

Built in: ``None``, ``bool``, ``int``, ``float``, ``str``, ``list``, ``dict`` (any keys),
``tuple``, ``set``, ``frozenset``, ``bytes``, ``datetime``, ``date``, ``UUID``. Dataclasses
and pydantic models are registered with `register`; anything else takes an explicit
``encode``/``decode`` pair.

Nesting is bounded by `MAX_JSON_DEPTH` both ways: `to_json` refuses to produce data that
`from_json` would refuse, so whatever is written can be read back. Registered codecs get
the unchecked inner conversions, so a value is walked for its depth once, not once per
level of registered types.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime as _dt
import enum
import uuid
from collections.abc import Callable
from typing import Any, TypeVar, overload

from pydantic import BaseModel

from .bounded_json import MAX_JSON_DEPTH, check_json_depth, compact_json, loads_json, short_repr
from .errors import SerializationError, UnknownTypeError

__all__ = [
    "TYPE_KEY",
    "JSONValue",
    "TypeRegistry",
    "dumps",
    "from_json",
    "loads",
    "register",
    "registry",
    "to_json",
]

TYPE_KEY = "$type"

JSONValue = None | bool | int | float | str | list["JSONValue"] | dict[str, "JSONValue"]

T = TypeVar("T")
Encoder = Callable[[Any], dict[str, Any]]
Decoder = Callable[[dict[str, Any]], Any]

_PRIMITIVES = (str, int, float, bool, type(None))


class TypeRegistry:
    """Maps Python types to stable names and back, and converts values to and from JSON."""

    def __init__(self, *, max_depth: int = MAX_JSON_DEPTH) -> None:
        self.max_depth = max_depth
        self._encoders: dict[type, tuple[str, Encoder]] = {}
        self._decoders: dict[str, Decoder] = {}
        self._names: dict[str, type] = {}
        self._install_builtins()

    # -- registration ----------------------------------------------------------------

    @overload
    def register(
        self,
        cls: type[T],
        *,
        name: str | None = ...,
        encode: Encoder | None = ...,
        decode: Decoder | None = ...,
    ) -> type[T]: ...

    @overload
    def register(
        self,
        cls: None = ...,
        *,
        name: str | None = ...,
        encode: Encoder | None = ...,
        decode: Decoder | None = ...,
    ) -> Callable[[type[T]], type[T]]: ...

    def register(
        self,
        cls: type[T] | None = None,
        *,
        name: str | None = None,
        encode: Encoder | None = None,
        decode: Decoder | None = None,
    ) -> type[T] | Callable[[type[T]], type[T]]:
        """Register a dataclass, a pydantic model, an enum, or any type with encode/decode.

        Usable as ``@register``, ``@register(name="x")`` or ``register(cls, ...)``. The name is
        what is written to JSON, so keep it stable across releases; it defaults to
        ``module.QualName``.
        """

        def apply(target: type[T]) -> type[T]:
            self._add(target, name or f"{target.__module__}.{target.__qualname__}", encode, decode)
            return target

        return apply if cls is None else apply(cls)

    def _add(self, cls: type, name: str, encode: Encoder | None, decode: Decoder | None) -> None:
        known = self._names.get(name)
        if known is not None and known is not cls:
            raise SerializationError(
                f"type name {name!r} is already registered for {known.__qualname__}; "
                f"pick another name for {cls.__qualname__}"
            )
        if encode is None or decode is None:
            encode, decode = self._default_codec(cls, encode, decode)
        self._encoders[cls] = (name, encode)
        self._decoders[name] = decode
        self._names[name] = cls

    def _default_codec(
        self, cls: type, encode: Encoder | None, decode: Decoder | None
    ) -> tuple[Encoder, Decoder]:
        if isinstance(cls, type) and issubclass(cls, BaseModel):
            model = cls

            def enc_model(obj: Any) -> dict[str, Any]:
                return {"value": obj.model_dump(mode="json")}

            def dec_model(data: dict[str, Any]) -> Any:
                return model.model_validate(data["value"])

            return encode or enc_model, decode or dec_model
        if dataclasses.is_dataclass(cls):
            names = [f.name for f in dataclasses.fields(cls) if f.init]
            to, frm = self._to_json, self._from_json

            def enc_dc(obj: Any) -> dict[str, Any]:
                return {n: to(getattr(obj, n)) for n in names}

            def dec_dc(data: dict[str, Any]) -> Any:
                return cls(**{n: frm(data[n]) for n in names if n in data})

            return encode or enc_dc, decode or dec_dc
        if isinstance(cls, type) and issubclass(cls, enum.Enum):
            enum_cls = cls

            def enc_enum(obj: Any) -> dict[str, Any]:
                return {"value": obj.value}

            def dec_enum(data: dict[str, Any]) -> Any:
                return enum_cls(data["value"])

            return encode or enc_enum, decode or dec_enum
        raise SerializationError(
            f"{cls.__qualname__} is neither a dataclass, a pydantic model nor an enum; "
            "register it with both encode= and decode="
        )

    def is_registered(self, cls: type) -> bool:
        return cls in self._encoders

    def name_of(self, cls: type) -> str:
        try:
            return self._encoders[cls][0]
        except KeyError:
            raise self._unknown(cls) from None

    def type_named(self, name: str) -> type:
        try:
            return self._names[name]
        except KeyError:
            raise _unknown_tag(name) from None

    # -- conversion ------------------------------------------------------------------

    def to_json(self, value: Any) -> Any:
        """Convert a value into plain JSON data (dicts, lists, primitives).

        Data nested deeper than `max_depth` (a value that contains itself included) raises
        `SerializationError`, so everything written here can be read back.
        """
        if type(value) in _PRIMITIVES:
            return value
        try:
            data = self._to_json(value)
        except RecursionError:
            raise self._too_deep("write") from None
        check_json_depth(data, max_depth=self.max_depth)
        return data

    def _too_deep(self, action: str) -> SerializationError:
        return SerializationError(
            f"cannot {action} a value nested deeper than the limit of {self.max_depth} "
            "levels of lists and objects (or one that contains itself); flatten it"
        )

    def _to_json(self, value: Any) -> Any:
        cls = type(value)
        if cls in _PRIMITIVES:
            return value
        if cls is list:
            return [self._to_json(v) for v in value]
        if cls is dict:
            if all(type(k) is str for k in value) and TYPE_KEY not in value:
                return {k: self._to_json(v) for k, v in value.items()}
            return {
                TYPE_KEY: "map",
                "items": [[self._to_json(k), self._to_json(v)] for k, v in value.items()],
            }
        entry = self._encoders.get(cls)
        if entry is None:
            entry = self._encoder_for_subclass(cls)
        name, encode = entry
        data = encode(value)
        data[TYPE_KEY] = name
        return data

    def _encoder_for_subclass(self, cls: type) -> tuple[str, Encoder]:
        # Subclasses of builtins we handle (e.g. str enums, OrderedDict) must not silently
        # lose their type, so only exact registration counts; the error says what to do.
        raise self._unknown(cls)

    def _unknown(self, cls: type) -> UnknownTypeError:
        name = f"{cls.__module__}.{cls.__qualname__}"
        return UnknownTypeError(
            f"cannot serialize a value of type {name}: register it with "
            "cantata.core.register (dataclasses, pydantic models and enums need no codec)",
            type_name=name,
        )

    def from_json(self, data: Any) -> Any:
        """Rebuild values from plain JSON data written by `to_json`.

        Data nested deeper than `max_depth` raises `SerializationError` before any of it
        is decoded.
        """
        if type(data) in _PRIMITIVES:
            return data
        check_json_depth(data, max_depth=self.max_depth)
        return self._from_checked(data)

    def _from_checked(self, data: Any) -> Any:
        try:
            return self._from_json(data)
        except RecursionError:
            raise self._too_deep("read") from None

    def _from_json(self, data: Any) -> Any:
        cls = type(data)
        if cls in _PRIMITIVES:
            return data
        if cls is list:
            return [self._from_json(v) for v in data]
        if cls is dict:
            tag = data.get(TYPE_KEY)
            if tag is None:
                return {k: self._from_json(v) for k, v in data.items()}
            if type(tag) is not str:
                raise SerializationError(f"{TYPE_KEY} must be a string, got {type(tag).__name__}")
            decode = self._decoders.get(tag)
            if decode is None:
                raise _unknown_tag(tag)
            try:
                return decode(data)
            except (SerializationError, RecursionError):
                raise
            except Exception as exc:
                raise SerializationError(
                    f"malformed data for type {short_repr(tag)}: {short_repr(str(exc), 300)}"
                ) from exc
        raise SerializationError(f"not JSON data: a value of type {cls.__name__}")

    def dumps(self, value: Any) -> str:
        """Serialize to a JSON string (compact, UTF-8 friendly).

        A string holding a lone surrogate raises `SerializationError`: such text cannot be
        written as UTF-8, and `loads` refuses it.
        """
        data = self.to_json(value)
        try:
            text = compact_json(data)
        except ValueError as exc:  # an int too long for a decimal string
            raise SerializationError(
                f"cannot serialize: {short_repr(str(exc), 200)}; write such numbers as strings"
            ) from None
        if text.isascii():
            return text
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise SerializationError(
                f"cannot serialize a string holding a lone surrogate "
                f"(near {short_repr(text[max(exc.start - 20, 0) : exc.start])}); "
                "build strings from proper text"
            ) from None
        return text

    def loads(self, text: str | bytes) -> Any:
        """Parse a JSON string written by `dumps`; bad input raises `SerializationError`.

        Malformed JSON, bytes that are not UTF-8, lone surrogates and nesting deeper than
        `max_depth` are all refused (see `cantata.core.loads_json`).
        """
        return self._from_checked(loads_json(text, max_depth=self.max_depth))

    # -- builtins ----------------------------------------------------------------------

    def _install_builtins(self) -> None:
        to, frm = self._to_json, self._from_json

        def builtin(cls: type, name: str, enc: Encoder, dec: Decoder) -> None:
            self._encoders[cls] = (name, enc)
            self._decoders[name] = dec
            self._names[name] = cls

        builtin(
            tuple,
            "tuple",
            lambda v: {"items": [to(x) for x in v]},
            lambda d: tuple(frm(x) for x in _list(d, "items")),
        )
        builtin(
            set,
            "set",
            lambda v: {"items": [to(x) for x in v]},
            lambda d: {frm(x) for x in _list(d, "items")},
        )
        builtin(
            frozenset,
            "frozenset",
            lambda v: {"items": [to(x) for x in v]},
            lambda d: frozenset(frm(x) for x in _list(d, "items")),
        )
        builtin(
            bytes,
            "bytes",
            lambda v: {"base64": base64.b64encode(v).decode("ascii")},
            lambda d: base64.b64decode(_str(d, "base64"), validate=True),
        )
        builtin(
            _dt.datetime,
            "datetime",
            lambda v: {"iso": v.isoformat()},
            lambda d: _dt.datetime.fromisoformat(_str(d, "iso")),
        )
        builtin(
            _dt.date,
            "date",
            lambda v: {"iso": v.isoformat()},
            lambda d: _dt.date.fromisoformat(_str(d, "iso")),
        )
        builtin(uuid.UUID, "uuid", lambda v: {"hex": v.hex}, lambda d: uuid.UUID(_str(d, "hex")))
        # "map" only decodes: `to_json` writes it for dicts with non-string keys or a "$type" key.
        self._decoders["map"] = lambda d: {frm(k): frm(v) for k, v in _pairs(d)}
        self._names["map"] = dict


def _list(data: dict[str, Any], key: str) -> list[Any]:
    value = data[key]
    if type(value) is not list:
        raise SerializationError(f"field {key!r} must be a list, got {type(value).__name__}")
    return value


def _str(data: dict[str, Any], key: str) -> str:
    value = data[key]
    if type(value) is not str:
        raise SerializationError(f"field {key!r} must be a string, got {type(value).__name__}")
    return value


def _pairs(data: dict[str, Any]) -> list[tuple[Any, Any]]:
    items = _list(data, "items")
    if not all(type(p) is list and len(p) == 2 for p in items):
        raise SerializationError("field 'items' of a map must be a list of [key, value] pairs")
    return [(p[0], p[1]) for p in items]


registry = TypeRegistry()
"""The process-wide registry; cantata's own types register here on import."""


def register(
    cls: Any = None,
    *,
    name: str | None = None,
    encode: Encoder | None = None,
    decode: Decoder | None = None,
) -> Any:
    """Register a type in the global registry (see `TypeRegistry.register`)."""
    return registry.register(cls, name=name, encode=encode, decode=decode)


def to_json(value: Any) -> Any:
    """Convert a value to plain JSON data through the global registry."""
    return registry.to_json(value)


def from_json(data: Any) -> Any:
    """Rebuild a value from plain JSON data through the global registry."""
    return registry.from_json(data)


def dumps(value: Any) -> str:
    """Serialize a value to a JSON string through the global registry."""
    return registry.dumps(value)


def loads(text: str | bytes) -> Any:
    """Load a JSON string written by `dumps`; raises `SerializationError` on bad input."""
    return registry.loads(text)


def _unknown_tag(tag: str) -> UnknownTypeError:
    hint = "register the type before loading this data"
    if tag.startswith("__main__."):
        # Another process (a Ray worker, a served app) imports modules, never the script
        # that was run, so a type defined there cannot be registered on its side.
        hint = (
            "the type was defined in the script that was run (__main__), which other "
            "processes such as Ray workers cannot import; move it into a module both import"
        )
    return UnknownTypeError(f"unknown type tag {short_repr(tag)}: {hint}", type_name=tag)
