"""Turn a Python function's signature into a pydantic model of its arguments.

Fields get internal names (``f0``, ``f1``...) and the parameter name as alias, so that any
parameter name (``json``, ``schema``, ``_private``) works without clashing with
`BaseModel`'s own attributes; the JSON schema and validation use the aliases.
"""

from __future__ import annotations

import functools
import inspect
import re
import sys
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, PydanticUserError, TypeAdapter, create_model

from ..core import ConfigurationError
from .context import ToolContext
from .errors import ToolSchemaError

_SCHEMA_KEYS_WITH_SCHEMA = ("items", "additionalProperties", "not", "contains")
_SCHEMA_KEYS_WITH_LIST = ("anyOf", "allOf", "oneOf", "prefixItems")
_SCHEMA_KEYS_WITH_MAP = ("properties", "$defs", "definitions")


@dataclass(slots=True, frozen=True)
class Signature:
    """How to call a function with validated arguments."""

    model: type[BaseModel]
    fields: tuple[tuple[str, str], ...]
    """(internal field name, parameter name) for every schema parameter."""
    positional_only: tuple[str, ...]
    """Parameters passed by position, in signature order (the context may be one)."""
    context_param: str | None
    accepts_extra: bool


def build_signature(func: Callable[..., Any], tool_name: str) -> Signature:
    """Read `func`'s parameters into an arguments model; raise `ConfigurationError` for
    parameters a model cannot fill (``*args``, unresolvable annotations)."""
    try:
        sig = inspect.signature(func)
    except (TypeError, ValueError) as exc:
        raise ConfigurationError(
            f"cannot read the signature of the function of tool {tool_name!r}: {exc}"
        ) from exc
    _refuse_unbound_method(func, sig, tool_name)
    hints = _type_hints(func, tool_name, sig.parameters)
    docs = parameter_docs(inspect.getdoc(func))
    definitions: dict[str, Any] = {}
    names: list[tuple[str, str]] = []
    positional_only: list[str] = []
    context_param: str | None = None
    accepts_extra = False
    for param in sig.parameters.values():
        if param.kind is param.VAR_POSITIONAL:
            raise ConfigurationError(
                f"tool {tool_name!r}: parameter *{param.name} cannot be filled by a model; "
                "use named parameters"
            )
        if param.kind is param.VAR_KEYWORD:
            accepts_extra = True
            continue
        annotation = hints.get(param.name, Any)
        if _is_tool_context(annotation):
            context_param = param.name
            if param.kind is param.POSITIONAL_ONLY:
                positional_only.append(param.name)
            continue
        if param.kind is param.POSITIONAL_ONLY:
            positional_only.append(param.name)
        internal = f"f{len(names)}"
        definitions[internal] = _field_definition(annotation, param, docs.get(param.name))
        names.append((internal, param.name))
    config = ConfigDict(
        extra="allow" if accepts_extra else "forbid",
        populate_by_name=False,
        arbitrary_types_allowed=True,
    )
    try:
        model = create_model(f"{_camel(tool_name)}Arguments", __config__=config, **definitions)
    except Exception as exc:
        raise ConfigurationError(
            f"tool {tool_name!r}: cannot build a schema from the function's parameters: {exc}"
        ) from exc
    return Signature(model, tuple(names), tuple(positional_only), context_param, accepts_extra)


_JSON_TYPES = (
    "str, int, float, bool, None, list/tuple/set and dict of those, Literal, an Enum, "
    "or a dataclass, TypedDict or pydantic model made of them"
)


def signature_schema(sig: Signature, tool_name: str) -> dict[str, Any]:
    """The JSON schema of the arguments model; a parameter whose type has none (a plain
    class, a callable, a queue) raises `ToolSchemaError` naming the tool and the parameter:
    a model cannot be told how to fill it."""
    try:
        return sig.model.model_json_schema(by_alias=True)
    except PydanticUserError as exc:
        internal, param = _without_schema(sig)
        shown = sig.model.model_fields[internal].annotation if internal else None
        raise ToolSchemaError(
            f"tool {tool_name!r}: parameter {param!r} has type {_type_name(shown)}, which has "
            f"no JSON schema, so a model cannot be told how to fill it; use JSON types "
            f"({_JSON_TYPES}), pass the object to the run as a tool keyword argument and read "
            "it from a `ToolContext` parameter, or give the tool an explicit `parameters=` "
            f"schema ({exc.message})",
            tool_name=tool_name,
            parameter=param,
        ) from exc


def _without_schema(sig: Signature) -> tuple[str | None, str]:
    """The first (internal name, parameter name) whose type has no JSON schema."""
    config = ConfigDict(arbitrary_types_allowed=True)
    for internal, param in sig.fields:
        field = sig.model.model_fields[internal]
        try:
            TypeAdapter(field.annotation or Any, config=config).json_schema()
        except PydanticUserError:
            return internal, param
    return None, "(unknown)"


def _type_name(annotation: Any) -> str:
    if isinstance(annotation, type):
        return f"{annotation.__module__}.{annotation.__qualname__}"
    return repr(annotation)


def _refuse_unbound_method(
    func: Callable[..., Any], sig: inspect.Signature, tool_name: str
) -> None:
    """``@tool`` on a method in its class body makes a tool that is never bound: ``self``
    would be a parameter the model has to fill, and every call would fail."""
    first = next(iter(sig.parameters.values()), None)
    if first is None or first.name not in ("self", "cls") or not inspect.isfunction(func):
        return
    owner, _, name = func.__qualname__.rpartition(".")
    if owner and not owner.endswith("<locals>"):
        raise ConfigurationError(
            f"tool {tool_name!r}: {func.__qualname__} is a method, and a tool made from it "
            f"in its class is never bound to an instance; make the tool from the bound "
            f"method instead: tool(instance.{name})"
        )


def _type_hints(
    func: Callable[..., Any], tool_name: str, params: Mapping[str, inspect.Parameter]
) -> dict[str, Any]:
    """The resolved annotations of `params`, one by one.

    Only parameters are resolved: a return annotation (or one of a parameter a partial
    already bound) is not part of the schema, so a name there that exists only for type
    checkers must not stop the tool from being built. A parameter the function object
    carries no annotation for (a class used as the function: its signature comes from its
    fields) uses the annotation of its signature, resolved in the class's module.
    """
    target = _annotated_target(func)
    annotations: dict[str, Any] = dict(getattr(target, "__annotations__", None) or {})
    globalns: dict[str, Any] | None = getattr(target, "__globals__", None)
    if globalns is None:
        module = sys.modules.get(getattr(func, "__module__", None) or "")
        globalns = vars(module) if module is not None else {}
    hints: dict[str, Any] = {}
    for name, param in params.items():
        annotation = annotations.get(name, param.annotation)
        if annotation is param.empty:
            continue
        holder = _Annotations({name: annotation})
        try:
            hints.update(typing.get_type_hints(holder, globalns=globalns, include_extras=True))
        except Exception as exc:
            raise ConfigurationError(
                f"tool {tool_name!r}: cannot resolve the type annotation of parameter {name!r} "
                f"({annotation!r}): {exc}; define the types it names at module level"
            ) from exc
    return hints


class _Annotations:
    """Carries some annotations to `typing.get_type_hints` without the rest of a function."""

    def __init__(self, annotations: dict[str, Any]) -> None:
        self.__annotations__ = annotations


def _annotated_target(func: Callable[..., Any]) -> Any:
    """The function whose annotations describe `func`'s parameters: a partial's function,
    a decorated function's original (as `inspect.signature` reads it), or the
    ``__call__`` of a callable object."""
    target: Any = func
    while isinstance(target, functools.partial):
        target = target.func
    if not inspect.isfunction(target) and not inspect.ismethod(target):
        call = getattr(target, "__call__", None)  # noqa: B004 - callable objects
        if call is not None:
            target = call
    return inspect.unwrap(target)


def _field_definition(
    annotation: Any, param: inspect.Parameter, documented: str | None
) -> tuple[Any, Any]:
    annotation, description = _split_description(annotation)
    if description is None and documented and not _has_field_description(annotation):
        description = documented
    kwargs: dict[str, Any] = {"alias": param.name}
    if description is not None:
        kwargs["description"] = description
    if param.default is not param.empty:
        kwargs["default"] = param.default
    return annotation, Field(**kwargs)


def _split_description(annotation: Any) -> tuple[Any, str | None]:
    """``Annotated[int, "the count"]`` -> (int, "the count"); other metadata is kept."""
    if get_origin(annotation) is not Annotated:
        return annotation, None
    base, *metadata = get_args(annotation)
    texts = [m for m in metadata if isinstance(m, str)]
    rest = [m for m in metadata if not isinstance(m, str)]
    description = " ".join(texts) if texts else None
    if rest:
        return Annotated[(base, *rest)], description
    return base, description


def _has_field_description(annotation: Any) -> bool:
    if get_origin(annotation) is not Annotated:
        return False
    return any(getattr(m, "description", None) for m in get_args(annotation)[1:])


def _is_tool_context(annotation: Any) -> bool:
    if annotation is ToolContext:
        return True
    origin = get_origin(annotation)
    if origin is Annotated:
        return _is_tool_context(get_args(annotation)[0])
    if origin is Union or origin is types.UnionType:
        return any(arg is ToolContext for arg in get_args(annotation))
    return False


def _camel(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in name.replace("-", "_").split("_"))


def clean_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """Drop pydantic's generated ``title`` keys: noise in every prompt that carries tools."""
    out = {k: v for k, v in schema.items() if not (k == "title" and isinstance(v, str))}
    for key in _SCHEMA_KEYS_WITH_SCHEMA:
        if isinstance(out.get(key), dict):
            out[key] = clean_schema(out[key])
    for key in _SCHEMA_KEYS_WITH_LIST:
        if isinstance(out.get(key), list):
            out[key] = [clean_schema(s) if isinstance(s, dict) else s for s in out[key]]
    for key in _SCHEMA_KEYS_WITH_MAP:
        if isinstance(out.get(key), dict):
            out[key] = {
                name: clean_schema(s) if isinstance(s, dict) else s for name, s in out[key].items()
            }
    return out


def first_paragraph(doc: str | None) -> str:
    """The first paragraph of a docstring, on one line (a section header also ends it)."""
    if not doc:
        return ""
    lines: list[str] = []
    for line in inspect.cleandoc(doc).splitlines():
        if not line.strip() or _SECTION.match(line):
            break
        lines.append(line.strip())
    return " ".join(lines)


def parameter_docs(doc: str | None) -> dict[str, str]:
    """Parameter descriptions from a Google-style ``Args:`` section of a docstring."""
    if not doc:
        return {}
    out: dict[str, str] = {}
    lines = iter(inspect.cleandoc(doc).splitlines())
    if not any(_SECTION.match(line) for line in lines):
        return out
    current: str | None = None
    item_indent: int | None = None
    for line in lines:
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        if indent == 0:
            break  # the next section
        item = _item(line.strip())
        if item_indent is None:
            item_indent = indent
        if item is not None and indent == item_indent:
            current = item[0]
            out[current] = item[1]
        elif current is not None:
            out[current] = f"{out[current]} {line.strip()}".strip()
    return out


_SECTION = re.compile(r"^(Args|Arguments|Parameters|Params):\s*$")
_NAME = re.compile(r"^\*{0,2}(\w+)\s*")


def _item(line: str) -> tuple[str, str] | None:
    """``name (type): text`` -> (name, text); the type may nest parentheses."""
    match = _NAME.match(line)
    if match is None:
        return None
    rest = line[match.end() :]
    if rest.startswith("("):
        depth = 0
        for index, char in enumerate(rest):
            depth += {"(": 1, ")": -1}.get(char, 0)
            if depth == 0:
                rest = rest[index + 1 :].lstrip()
                break
        else:
            return None
    if not rest.startswith(":"):
        return None
    return match.group(1), rest[1:].strip()
