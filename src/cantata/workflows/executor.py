"""Executors: the nodes of a workflow, with handlers chosen by the type of the message.

An executor is a definition shared by every run of a workflow; what a run changes lives in
the run (shared state, executor state, logs), reached through the `WorkflowContext`. That
is what lets many runs of one workflow proceed at once, fully isolated.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar, get_args, get_origin, overload

from ..core import ConfigurationError, WorkflowError, register
from ..core.retry import RetryPolicy
from ._typing import accepts_value, is_plain_class, resolve_hints, type_name

if TYPE_CHECKING:
    from .context import WorkflowContext

__all__ = [
    "Executor",
    "FunctionExecutor",
    "NeedsPersonRequest",
    "executor",
    "handler",
    "response_handler",
]

F = TypeVar("F", bound=Callable[..., Any])
_ID = re.compile(r"^[A-Za-z0-9_.:\-]+$")
_HANDLER_ATTR = "__cantata_workflow_handler__"
_RESPONSE_ATTR = "__cantata_workflow_response_handler__"


@dataclass(slots=True, frozen=True)
class _Handler:
    """One handler of an executor: what it takes, what it sends and what it yields."""

    name: str
    fn: Callable[..., Any]
    message_type: Any
    output_types: tuple[Any, ...]
    workflow_output_types: tuple[Any, ...]
    takes_ctx: bool
    is_async: bool
    response_type: Any = None  # set for response handlers: the answer's type


@register(name="cantata.workflows.NeedsPersonRequest")
@dataclass(slots=True)
class NeedsPersonRequest:
    """What a run asks a person when an executor failed with `NeedsPerson`.

    The run stops idle with this request pending (a `RequestInfoEvent` whose data it is),
    like one made with `WorkflowContext.request_info`, and it is kept in checkpoints. Answer
    it with `send_responses` (or `resume(..., responses=)` in another process): by default
    the answer is a ``str`` (a note of what the person did) and the executor is run again
    on the same messages (and answers) it failed on, within the effect scope of the
    superstep that failed, so effects it journaled then are not repeated. An executor that
    declares a ``@response_handler`` for `NeedsPersonRequest` gets the answer there
    instead (of the type that handler declares), and decides itself what follows.
    """

    executor_id: str
    error: str
    """The failure's message: what the person is asked to resolve."""
    error_type: str
    """The name of the failure's class (`NeedsPerson` or a subclass of it)."""
    details: Any = None
    """`NeedsPerson.details`: data the person may need (an order, an amount)."""
    superstep: int = 0
    """The superstep that failed: the run-again uses its effect journal."""
    messages: list[tuple[Any, list[str]]] = field(default_factory=list)
    """The messages that are handled again, with the ids of the executors that sent them."""
    answers: list[tuple[Any, Any]] = field(default_factory=list)
    """Answers to earlier requests (`PendingRequest`, answer) that are handled again."""


def _context_types(annotation: Any) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    """The (sent, yielded) types declared by a ``WorkflowContext[Out, WorkflowOut]`` hint."""
    args = get_args(annotation)
    if get_origin(annotation) is None or not args:
        return (), ()

    def split(tp: Any) -> tuple[Any, ...]:
        if tp is None or tp is type(None) or repr(tp) in ("typing.Never", "typing.NoReturn"):
            return ()
        origin = get_origin(tp)
        if origin is not None and repr(origin) in ("typing.Union", "<class 'types.UnionType'>"):
            return tuple(get_args(tp))
        return (tp,)

    out = split(args[0])
    wout = split(args[1]) if len(args) > 1 else ()
    return out, wout


def _inspect(
    fn: Callable[..., Any],
    *,
    bound: bool,
    response: bool,
    output: tuple[Any, ...] | None,
    workflow_output: tuple[Any, ...] | None,
) -> _Handler:
    """Read a handler's signature: message (and answer) types, context, declared outputs."""
    params = list(inspect.signature(fn).parameters.values())
    if bound:
        params = params[1:]
    hints = resolve_hints(fn, depth=4)
    need = 2 if response else 1
    qual = getattr(fn, "__qualname__", repr(fn))
    if len(params) < need or len(params) > need + 1:
        shape = "(request, response[, ctx])" if response else "(message[, ctx])"
        raise ConfigurationError(f"handler {qual} must take {shape}; it takes {len(params)}")
    for p in params[:need]:
        if p.name not in hints:
            raise ConfigurationError(
                f"handler {qual}: annotate parameter {p.name!r} with the type it takes "
                "(use Any to take everything)"
            )
    takes_ctx = len(params) == need + 1
    sent, yielded = _context_types(hints.get(params[need].name)) if takes_ctx else ((), ())
    returned = hints.get("return", None)
    if returned is not None and returned is not type(None) and returned is not Any:
        sent = (*sent, returned)
    return _Handler(
        name=fn.__name__,
        fn=fn,
        message_type=hints[params[0].name],
        output_types=tuple(output) if output is not None else sent,
        workflow_output_types=tuple(workflow_output) if workflow_output is not None else yielded,
        takes_ctx=takes_ctx,
        is_async=inspect.iscoroutinefunction(fn),
        response_type=hints[params[1].name] if response else None,
    )


def _as_tuple(value: Any) -> tuple[Any, ...] | None:
    if value is None:
        return None
    return tuple(value) if isinstance(value, list | tuple) else (value,)


@overload
def handler(fn: F, /) -> F: ...
@overload
def handler(*, output: Any = None, workflow_output: Any = None) -> Callable[[F], F]: ...


def handler(fn: Any = None, /, *, output: Any = None, workflow_output: Any = None) -> Any:
    """Mark a method as a handler for the type of its first parameter.

    Sent and yielded types come from ``ctx: WorkflowContext[Sent, Yielded]`` and the return
    annotation (a returned value is sent to every out-edge), or from ``output=`` and
    ``workflow_output=`` (a type or a list of types).
    """

    def mark(f: F) -> F:
        setattr(f, _HANDLER_ATTR, (_as_tuple(output), _as_tuple(workflow_output)))
        return f

    return mark if fn is None else mark(fn)


@overload
def response_handler(fn: F, /) -> F: ...
@overload
def response_handler(*, output: Any = None, workflow_output: Any = None) -> Callable[[F], F]: ...


def response_handler(fn: Any = None, /, *, output: Any = None, workflow_output: Any = None) -> Any:
    """Mark a method ``(self, request: Req, response: Answer[, ctx])`` as the taker of answers
    to requests of type ``Req`` made with `WorkflowContext.request_info`."""

    def mark(f: F) -> F:
        setattr(f, _RESPONSE_ATTR, (_as_tuple(output), _as_tuple(workflow_output)))
        return f

    return mark if fn is None else mark(fn)


class Executor:
    """A node of a workflow: subclass it and mark methods with `@handler`.

    Handlers are picked by the message's type; each gets the message and (optionally) a
    `WorkflowContext`. Keep per-run data in the context (state, executor state, logs), not
    on ``self``: one executor serves every run of its workflow at once.
    """

    retry_policy: RetryPolicy | None = None
    """How a failed invocation is tried again within its superstep (None: it is not); give
    it as ``retry_policy=`` or with `WorkflowBuilder.with_retry`. A failure of the fatal
    class fails the run with a `WorkflowError` naming the executor; a `NeedsPerson` failure
    becomes a `NeedsPersonRequest` (unless the policy retries ``"needs_person"`` and has
    attempts left)."""

    def __init__(self, id: str | None = None, *, retry_policy: RetryPolicy | None = None) -> None:
        ident = id if id is not None else type(self).__name__
        if not isinstance(ident, str) or not _ID.match(ident):
            raise ConfigurationError(
                f"executor id {ident!r} is invalid: use letters, digits and _ . : -"
            )
        if retry_policy is not None and not isinstance(retry_policy, RetryPolicy):
            raise ConfigurationError(
                f"executor {ident!r}: retry_policy must be a cantata.core.retry.RetryPolicy "
                f"or None, not {type(retry_policy).__name__}"
            )
        self.id = ident
        if retry_policy is not None:
            self.retry_policy = retry_policy
        self._handlers, self._responses = _class_handlers(type(self))
        self._index()

    def _index(self) -> None:
        self._exact: dict[type, _Handler] = {}
        for h in self._handlers:
            if is_plain_class(h.message_type):
                self._exact.setdefault(h.message_type, h)
        self._cache: dict[type, _Handler | None] = {}
        self._cacheable = all(is_plain_class(h.message_type) for h in self._handlers)
        self._synchronous = self.retry_policy is None and not any(
            h.is_async for h in (*self._handlers, *self._responses)
        )
        """All handlers are plain functions and nothing retries (a retry waits its backoff):
        safe to run in the caller's task (no awaits)."""

    # -- what the executor takes and produces ------------------------------------------

    @property
    def input_types(self) -> list[Any]:
        """The message types its handlers take."""
        return [h.message_type for h in self._handlers]

    @property
    def output_types(self) -> list[Any]:
        """The types its handlers send downstream."""
        return _unique(t for h in (*self._handlers, *self._responses) for t in h.output_types)

    @property
    def workflow_output_types(self) -> list[Any]:
        """The types its handlers yield as workflow outputs."""
        return _unique(
            t for h in (*self._handlers, *self._responses) for t in h.workflow_output_types
        )

    def can_handle(self, message: Any) -> bool:
        """Whether some handler takes this message."""
        return self._find(message) is not None

    def _find(self, message: Any) -> _Handler | None:
        cls = type(message)
        found = self._exact.get(cls)
        if found is not None:
            return found
        if self._cacheable and cls in self._cache:
            return self._cache[cls]
        found = next((h for h in self._handlers if accepts_value(h.message_type, message)), None)
        if self._cacheable:
            self._cache[cls] = found
        return found

    def _find_response(self, request: Any, response: Any) -> _Handler | None:
        for h in self._responses:
            if accepts_value(h.message_type, request) and (
                response is _ANY or accepts_value(h.response_type, response)
            ):
                return h
        return None

    async def _initial_logs(self) -> dict[str, list[Any]]:
        """Logs every run starts with, by key (an agent executor's seeded thread).

        Read once when a run starts, before its first superstep, so that executors sharing
        a log seed it once even when they first run in the same superstep.
        """
        return {}

    def _answers_as_output(self) -> bool:
        """Whether, as a terminal node, what this executor answers is a workflow output by
        default (an agent executor's response); plain executors yield explicitly."""
        return False

    def _takes_person_answers(self) -> bool:
        """Whether a response handler declares `NeedsPersonRequest` (it then gets the
        answer, instead of the executor being run again)."""
        return any(h.message_type is NeedsPersonRequest for h in self._responses)

    def _response_type_for(self, request: Any) -> Any:
        """The answer type declared by the response handler for this request, or None."""
        for h in self._responses:
            if accepts_value(h.message_type, request):
                return h.response_type
        return None

    def _handler_for(self, message: Any) -> _Handler:
        """The handler that takes `message`; a `WorkflowError` naming the types when none."""
        h = self._find(message)
        if h is None:
            raise WorkflowError(
                f"executor {self.id!r} has no handler for a message of type "
                f"{type_name(type(message))}; it takes {[type_name(t) for t in self.input_types]}"
            )
        return h

    async def _execute(self, message: Any, ctx: WorkflowContext[Any, Any]) -> None:
        """Run the handler for `message`; a value it returns is sent to every out-edge."""
        h = self._handler_for(message)
        result = self._invoke(h, (message, ctx) if h.takes_ctx else (message,))
        if h.is_async:
            result = await result
        if result is not None:
            ctx.send_message(result)

    async def _execute_response(
        self, request: Any, response: Any, ctx: WorkflowContext[Any, Any]
    ) -> None:
        h = self._find_response(request, response)
        if h is None:
            raise WorkflowError(
                f"executor {self.id!r} has no response handler for a request of type "
                f"{type_name(type(request))} with an answer of type {type_name(type(response))}"
            )
        result = self._invoke(h, (request, response, ctx) if h.takes_ctx else (request, response))
        if h.is_async:
            result = await result
        if result is not None:
            ctx.send_message(result)

    def _invoke(self, h: _Handler, args: tuple[Any, ...]) -> Any:
        return h.fn(self, *args)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(id={self.id!r})"


_ANY = object()
_CLASS_HANDLERS: dict[type, tuple[tuple[_Handler, ...], tuple[_Handler, ...]]] = {}


def _class_handlers(cls: type) -> tuple[tuple[_Handler, ...], tuple[_Handler, ...]]:
    """The handlers and response handlers of an executor class, read once per class.

    Read at the first instantiation, not at class creation, so that handler annotations may
    name types defined later in the module (or in the function that makes the executor).
    """
    known = _CLASS_HANDLERS.get(cls)
    if known is not None:
        return known
    found: dict[str, _Handler] = {}
    responses: dict[str, _Handler] = {}
    for klass in reversed(cls.__mro__):
        for name, member in vars(klass).items():
            marks = getattr(member, _HANDLER_ATTR, None)
            if marks is not None:
                found.pop(name, None)
                found[name] = _inspect(
                    member, bound=True, response=False, output=marks[0], workflow_output=marks[1]
                )
            rmarks = getattr(member, _RESPONSE_ATTR, None)
            if rmarks is not None:
                responses.pop(name, None)
                responses[name] = _inspect(
                    member, bound=True, response=True, output=rmarks[0], workflow_output=rmarks[1]
                )
    result = (tuple(found.values()), tuple(responses.values()))
    _CLASS_HANDLERS[cls] = result
    return result


def _unique(items: Any) -> list[Any]:
    out: list[Any] = []
    for item in items:
        if not any(item is o or item == o for o in out):
            out.append(item)
    return out


class FunctionExecutor(Executor):
    """An executor made from one function ``(message[, ctx])``, sync or async."""

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        id: str | None = None,
        output: Any = None,
        workflow_output: Any = None,
        retry_policy: RetryPolicy | None = None,
    ) -> None:
        super().__init__(
            id or getattr(fn, "__name__", None) or "function", retry_policy=retry_policy
        )
        h = _inspect(
            fn,
            bound=False,
            response=False,
            output=_as_tuple(output),
            workflow_output=_as_tuple(workflow_output),
        )
        self._fn = fn
        self._handlers = (h,)
        self._index()

    def _invoke(self, h: _Handler, args: tuple[Any, ...]) -> Any:
        return h.fn(*args)


@overload
def executor(fn: Callable[..., Awaitable[Any] | Any], /) -> FunctionExecutor: ...
@overload
def executor(
    *,
    id: str | None = None,
    output: Any = None,
    workflow_output: Any = None,
    retry_policy: RetryPolicy | None = None,
) -> Callable[[Callable[..., Any]], FunctionExecutor]: ...


def executor(
    fn: Any = None,
    /,
    *,
    id: str | None = None,
    output: Any = None,
    workflow_output: Any = None,
    retry_policy: RetryPolicy | None = None,
) -> Any:
    """Make a plain function ``(message[, ctx])`` an executor; its id is the function's name
    (``retry_policy=``: see `Executor.retry_policy`)."""

    def make(f: Callable[..., Any]) -> FunctionExecutor:
        return FunctionExecutor(
            f, id=id, output=output, workflow_output=workflow_output, retry_policy=retry_policy
        )

    return make if fn is None else make(fn)
