"""`FunctionTool` and `@tool`: a typed Python function a model can call.

The function's signature is the contract: its parameters become the JSON schema the model
sees, and the same pydantic model validates what the model sends back, so a tool body
only ever receives arguments of the declared types.

A tool that returns a `DataContent` (an image), alone or among the items of a returned
list, hands it to the model to see: it follows the call's result in the tool message, and
the result reads the other items (or names the attachment).
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import re
import types
from collections.abc import Callable, Mapping
from typing import Any, Literal, TypeAlias, overload

from pydantic import BaseModel, ValidationError

from ..core import ConfigurationError, ToolError
from ..core.retry import RetryPolicy
from ..models import ToolSpec
from ._signature import (
    Signature,
    build_signature,
    clean_schema,
    first_paragraph,
    signature_schema,
)
from .context import ToolContext

__all__ = [
    "ApprovalMode",
    "FunctionTool",
    "ToolArgumentsError",
    "ToolMethod",
    "plugin_tools",
    "tool",
]

ApprovalMode: TypeAlias = Literal["never_require", "always_require"]
"""Whether a person must approve each call of a tool before it runs."""

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_APPROVAL_MODES: frozenset[str] = frozenset(("never_require", "always_require"))


class ToolArgumentsError(ToolError):
    """The arguments a model sent do not fit the tool's schema; `errors` lists each problem."""

    def __init__(self, message: str, *, tool_name: str, errors: list[str] | None = None) -> None:
        super().__init__(message)
        self.tool_name = tool_name
        self.errors = errors or []


class FunctionTool:
    """A tool backed by a Python function (sync or async).

    Usually made with `@tool`; build one directly to choose the name, description or JSON
    schema yourself: ``FunctionTool("search", "Search the web.", func=search)``. With an
    explicit ``parameters`` schema (a dict or a pydantic model class) the model is told that
    schema; arguments are still validated against the function's own typed parameters.
    Calling the tool object calls the function unchanged.

    With a ``retry_policy`` (`cantata.core.retry.RetryPolicy`), `invoke` calls the function
    again after a failure of a class the policy retries (a timeout, a dropped connection, a
    5xx by default), after a jittered backoff that the run's cancellation ends at once; the
    arguments are validated once. An effect tool inside a durable run is retried within its
    one journal entry: every attempt gets the same `ToolContext.idempotency_key`, and only
    the result of the attempt that succeeded is journaled.
    """

    __slots__ = (
        "__weakref__",
        "_approval_mode",
        "_description",
        "_effect",
        "_func",
        "_is_async",
        "_name",
        "_parameters",
        "_required",
        "_retry_policy",
        "_signature",
    )

    def __init__(
        self,
        name: str,
        description: str = "",
        *,
        func: Callable[..., Any],
        parameters: dict[str, Any] | type[BaseModel] | None = None,
        approval_mode: ApprovalMode = "never_require",
        effect: bool = False,
        retry_policy: RetryPolicy | None = None,
    ) -> None:
        if not isinstance(name, str) or not _NAME.match(name):
            raise ConfigurationError(
                f"invalid tool name {name!r}: use 1 to 64 letters, digits, '_' or '-' "
                "(what OpenAI-compatible servers accept); pass name= to choose another"
            )
        if approval_mode not in _APPROVAL_MODES:
            raise ConfigurationError(
                f"tool {name!r}: approval_mode must be one of {sorted(_APPROVAL_MODES)}, "
                f"got {approval_mode!r}"
            )
        if not callable(func):
            raise ConfigurationError(f"tool {name!r}: func must be callable, got {func!r}")
        if retry_policy is not None and not isinstance(retry_policy, RetryPolicy):
            raise ConfigurationError(
                f"tool {name!r}: retry_policy must be a cantata.core.retry.RetryPolicy or "
                f"None, got {type(retry_policy).__name__}"
            )
        if _is_generator_callable(func):
            raise ConfigurationError(
                f"tool {name!r}: {func!r} is a generator function; calling it would not run "
                "its body, so the model would never get its values: return a list instead"
            )
        self._name = name
        self._description = description
        self._func = func
        self._approval_mode: ApprovalMode = approval_mode
        self._effect = effect is True
        self._retry_policy = retry_policy
        self._is_async = _is_async_callable(func)
        self._signature: Signature = build_signature(func, name)
        self._parameters, self._required = _parameters_schema(parameters, self._signature, name)

    # -- definition ----------------------------------------------------------------

    @property
    def name(self) -> str:
        """The name the model calls the tool by (unique among a run's tools)."""
        return self._name

    @property
    def description(self) -> str:
        """What the model is told the tool does; it decides when the model calls it."""
        return self._description

    @property
    def parameters(self) -> dict[str, Any]:
        """The JSON schema of the arguments (a copy: the tool itself is immutable)."""
        copied: dict[str, Any] = _deep_copy(self._parameters)
        return copied

    @property
    def spec(self) -> ToolSpec:
        """What a chat client is told about this tool."""
        return ToolSpec(self._name, self._description, self.parameters)

    @property
    def func(self) -> Callable[..., Any]:
        """The Python function the tool runs, unchanged."""
        return self._func

    @property
    def approval_mode(self) -> ApprovalMode:
        """Whether each call waits for a person's approval before it runs."""
        return self._approval_mode

    @property
    def effect(self) -> bool:
        """True when a call is a side effect: inside a durable workflow run its result is
        journaled by call id, and a resumed run gets it back instead of calling again."""
        return self._effect

    @property
    def retry_policy(self) -> RetryPolicy | None:
        """How a failing call of the function is tried again (None: it is not)."""
        return self._retry_policy

    @property
    def requires_approval(self) -> bool:
        """True when every call stops the loop with an approval request first."""
        return self._approval_mode == "always_require"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._func(*args, **kwargs)

    def __repr__(self) -> str:
        return f"FunctionTool(name={self._name!r}, approval_mode={self._approval_mode!r})"

    # -- running -------------------------------------------------------------------

    def validate_arguments(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """The arguments as the function's parameters receive them (validated, converted);
        raises `ToolArgumentsError` listing every problem."""
        if not isinstance(arguments, Mapping):
            raise ToolArgumentsError(
                f"arguments of tool {self._name!r} must be a JSON object, "
                f"got {type(arguments).__name__}",
                tool_name=self._name,
            )
        missing = [key for key in self._required if key not in arguments]
        if missing:
            problems = [f"{key}: field required" for key in missing]
            raise self._arguments_error(problems)
        try:
            validated = self._signature.model.model_validate(dict(arguments))
        except ValidationError as exc:
            raise self._arguments_error(_problems(exc)) from exc
        values = {param: getattr(validated, internal) for internal, param in self._signature.fields}
        if self._signature.accepts_extra and validated.model_extra:
            values.update(validated.model_extra)
        return values

    async def invoke(
        self, arguments: Mapping[str, Any], *, context: ToolContext | None = None
    ) -> Any:
        """Validate `arguments` and run the function; returns what it returns, unchanged
        (the function loop makes it JSON-able for the model).

        A sync function runs in a worker thread so it never blocks the event loop.
        Raises `ToolArgumentsError` for bad arguments, and whatever the function raises
        (its last failure, when the tool's `retry_policy` tried it again).
        """
        if context is not None:
            context.cancellation_token.raise_if_cancelled()
        values = self.validate_arguments(arguments)
        sig = self._signature
        if sig.context_param is not None:
            values[sig.context_param] = context or ToolContext(tool_name=self._name)
        args = [values.pop(name) for name in _positional_order(sig, values)]
        policy = self._retry_policy
        if policy is None or policy.attempts == 1:
            return await self._call(args, values)
        return await policy.call(
            lambda: self._call(args, values),
            what=f"tool {self._name!r}",
            token=context.cancellation_token if context is not None else None,
        )

    async def _call(self, args: list[Any], values: dict[str, Any]) -> Any:
        if self._is_async:
            result = await self._func(*args, **values)
        else:
            result = await asyncio.to_thread(functools.partial(self._func, *args, **values))
        if inspect.isawaitable(result):
            result = await result
        return result

    def _arguments_error(self, problems: list[str]) -> ToolArgumentsError:
        listed = "; ".join(problems)
        return ToolArgumentsError(
            f"invalid arguments for tool {self._name!r}: {listed}. "
            "Call the tool again with arguments that match its schema.",
            tool_name=self._name,
            errors=problems,
        )


@overload
def tool(func: Callable[..., Any], /) -> FunctionTool: ...


@overload
def tool(
    func: None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    approval_mode: ApprovalMode = "never_require",
    effect: bool = False,
    retry_policy: RetryPolicy | None = None,
) -> Callable[[Callable[..., Any]], FunctionTool]: ...


def tool(
    func: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    approval_mode: ApprovalMode = "never_require",
    effect: bool = False,
    retry_policy: RetryPolicy | None = None,
) -> FunctionTool | Callable[[Callable[..., Any]], FunctionTool]:
    """Make a typed function a `FunctionTool`: ``@tool`` or ``@tool(name=..., ...)``.

    The name defaults to the function's name, the description to the first paragraph of
    its docstring; ``effect=True`` marks a side effect, journaled by call id inside a
    durable workflow run; ``retry_policy=`` tries a failing call again (see `FunctionTool`);
    parameters annotated ``Annotated[T, "text"]`` or
    ``Annotated[T, Field(description=...)]`` describe themselves to the model (otherwise
    a Google-style ``Args:`` section of the docstring does).
    """

    def make(target: Callable[..., Any]) -> FunctionTool:
        tool_name = name if name is not None else getattr(target, "__name__", None)
        if tool_name is None:
            raise ConfigurationError(
                f"{target!r} has no __name__; give the tool one with @tool(name=...)"
            )
        text = description if description is not None else first_paragraph(target.__doc__)
        if _is_method_in_class_body(target):
            return ToolMethod(
                tool_name,
                text,
                func=target,
                approval_mode=approval_mode,
                effect=effect,
                retry_policy=retry_policy,
            )
        return FunctionTool(
            tool_name,
            text,
            func=target,
            approval_mode=approval_mode,
            effect=effect,
            retry_policy=retry_policy,
        )

    return make if func is None else make(func)


class ToolMethod(FunctionTool):
    """``@tool`` on a method in its class body: a tool of each instance (a plugin, as in
    Semantic Kernel). Read through an instance it is a `FunctionTool` bound to that
    instance, made once per instance (kept in the instance's ``__dict__`` when it has one);
    `plugin_tools(instance)` lists them all, and an agent given the instance offers them.
    The schema is built once, from the method without ``self``."""

    __slots__ = ("_attribute",)

    def __init__(
        self,
        name: str,
        description: str = "",
        *,
        func: Callable[..., Any],
        approval_mode: ApprovalMode = "never_require",
        effect: bool = False,
        retry_policy: RetryPolicy | None = None,
    ) -> None:
        # a stand-in for ``self`` makes the signature the one a bound method has
        super().__init__(
            name,
            description,
            func=functools.partial(func, None),
            approval_mode=approval_mode,
            effect=effect,
            retry_policy=retry_policy,
        )
        self._func = func
        self._attribute: str | None = None

    def __set_name__(self, owner: type, attribute: str) -> None:
        self._attribute = attribute

    @overload
    def __get__(self, instance: None, owner: type | None = None) -> ToolMethod: ...

    @overload
    def __get__(self, instance: object, owner: type | None = None) -> FunctionTool: ...

    def __get__(self, instance: object | None, owner: type | None = None) -> FunctionTool:
        if instance is None:
            return self
        bound = FunctionTool.__new__(FunctionTool)
        for slot in _SHARED_SLOTS:
            setattr(bound, slot, getattr(self, slot))
        bound._func = types.MethodType(self._func, instance)
        cache = getattr(instance, "__dict__", None)
        if cache is not None and self._attribute is not None:
            cache[self._attribute] = bound  # later reads find it before this descriptor
        return bound

    def __repr__(self) -> str:
        return f"ToolMethod(name={self._name!r}, approval_mode={self._approval_mode!r})"


_SHARED_SLOTS = (
    "_approval_mode",
    "_description",
    "_effect",
    "_is_async",
    "_name",
    "_parameters",
    "_required",
    "_retry_policy",
    "_signature",
)


def plugin_tools(instance: object) -> list[FunctionTool]:
    """The tools of a plugin object: its ``@tool``-marked methods bound to it, and tools
    kept as class attributes (a ``@staticmethod`` tool too), in definition order, a name
    defined in a subclass hiding the base class's. Empty when it has none."""
    if isinstance(instance, type):
        return []
    found: dict[str, FunctionTool] = {}
    hidden: set[str] = set()
    for klass in type(instance).__mro__:
        for attribute, value in vars(klass).items():
            if attribute in hidden:
                continue
            hidden.add(attribute)
            if isinstance(value, staticmethod):
                value = value.__func__
            if isinstance(value, ToolMethod):
                found[attribute] = getattr(instance, attribute)
            elif isinstance(value, FunctionTool):
                found[attribute] = value
    return list(found.values())


def _is_method_in_class_body(func: Callable[..., Any]) -> bool:
    """A plain function whose first parameter is ``self``, defined inside a class."""
    if not inspect.isfunction(func):
        return False
    owner, _, _ = func.__qualname__.rpartition(".")
    if not owner or owner.endswith("<locals>"):
        return False
    try:
        first = next(iter(inspect.signature(func).parameters.values()), None)
    except (TypeError, ValueError):
        return False
    return first is not None and first.name == "self" and first.kind is not first.KEYWORD_ONLY


def _is_generator_callable(func: Callable[..., Any]) -> bool:
    while isinstance(func, functools.partial):
        func = func.func
    call = getattr(func, "__call__", None)  # noqa: B004 - callable objects
    return any(
        inspect.isgeneratorfunction(f) or inspect.isasyncgenfunction(f)
        for f in (func, call)
        if f is not None
    )


def _is_async_callable(func: Callable[..., Any]) -> bool:
    while isinstance(func, functools.partial):
        func = func.func
    if inspect.iscoroutinefunction(func):
        return True
    call = getattr(func, "__call__", None)  # noqa: B004 - callable objects
    return call is not None and inspect.iscoroutinefunction(call)


def _parameters_schema(
    parameters: dict[str, Any] | type[BaseModel] | None, sig: Signature, tool_name: str
) -> tuple[dict[str, Any], tuple[str, ...]]:
    """The schema to show the model, and the names it requires beyond the function's own."""
    if parameters is None:
        schema = clean_schema(signature_schema(sig, tool_name))
        schema.setdefault("properties", {})
        return schema, ()
    if isinstance(parameters, type) and issubclass(parameters, BaseModel):
        schema = clean_schema(parameters.model_json_schema(by_alias=True))
    elif isinstance(parameters, dict):
        schema = _deep_copy(parameters)
    else:
        raise ConfigurationError(
            f"parameters must be a JSON schema dict or a pydantic model class, got {parameters!r}"
        )
    required = schema.get("required", [])
    if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        raise ConfigurationError(
            f"the 'required' of a tool schema must be a list of names: {required!r}"
        )
    return schema, tuple(required)


def _positional_order(sig: Signature, values: dict[str, Any]) -> list[str]:
    return [name for name in sig.positional_only if name in values]


def _problems(exc: ValidationError) -> list[str]:
    out: list[str] = []
    for error in exc.errors(include_url=False):
        where = ".".join(str(part) for part in error["loc"]) or "(arguments)"
        if error["type"] in ("missing", "missing_argument"):
            out.append(f"{where}: {error['msg']}")
            continue
        shown = repr(error.get("input"))
        if len(shown) > 60:
            shown = shown[:57] + "..."
        out.append(f"{where}: {error['msg']} (got {shown})")
    return out


def _deep_copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _deep_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_deep_copy(v) for v in value]
    return value
