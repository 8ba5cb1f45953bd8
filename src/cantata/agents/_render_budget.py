"""The Jinja2 sandbox of instruction templates, with a budget on each rendering.

A template and its arguments can ask for a lot: ``{{ text * 10**8 }}`` builds 100 MB,
nested loops over an argument's items run for minutes. Every rendering gets a budget of
output characters and seconds (a `Budget` in a context variable, so one shared environment
serves templates with different limits); it is checked where the cost arises:

- each chunk of output counts against the characters;
- every loop's iterable is wrapped (the parsed template is rewritten before compiling) so
  long loops check the clock, even loops that write nothing;
- every call and the ``*``, ``**`` and ``%`` operators check the clock, and refuse to
  build a value larger than the budget allows (a repeated string, a padded or formatted
  one, a power, a replacement that multiplies the text).
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Iterable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from jinja2 import StrictUndefined, nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment

_CHECK_EVERY = 256  # loop iterations between two looks at the clock
_PADDING_FILTERS = ("center", "indent", "wordwrap", "truncate")
_ITERATE = "__cantata_iterate"
_DIGITS = re.compile(r"\d+")


class RenderLimitError(Exception):
    """A rendering went past its budget (an internal signal, turned into a typed error)."""


@dataclass(slots=True)
class Budget:
    """What one rendering may still use."""

    max_chars: int
    max_seconds: float
    deadline: float = 0.0
    written: int = 0

    def start(self) -> None:
        self.deadline = time.monotonic() + self.max_seconds
        self.written = 0

    def tick(self) -> None:
        if time.monotonic() > self.deadline:
            raise RenderLimitError(f"took longer than {self.max_seconds:g} s")

    def write(self, chunk: str) -> None:
        self.written += len(chunk)
        if self.written > self.max_chars:
            raise RenderLimitError(f"wrote more than {self.max_chars:,} characters")

    def allow_size(self, size: float) -> None:
        if size > self.max_chars:
            raise RenderLimitError(
                f"would build a value of {size:,.0f} characters (limit {self.max_chars:,})"
            )


_BUDGET: ContextVar[Budget | None] = ContextVar("cantata_render_budget", default=None)


def current_budget() -> Budget | None:
    return _BUDGET.get()


def render_within(budget: Budget, chunks: Callable[[], Iterable[str]]) -> str:
    """Join the chunks a template generates, within `budget`; raises `RenderLimitError`."""
    budget.start()
    token = _BUDGET.set(budget)
    try:
        out: list[str] = []
        for chunk in chunks():
            budget.write(chunk)
            budget.tick()
            out.append(chunk)
        return "".join(out)
    finally:
        _BUDGET.reset(token)


def _iterate(iterable: Any) -> Iterator[Any]:
    budget = _BUDGET.get()
    if budget is None:
        yield from iterable
        return
    for count, item in enumerate(iterable):
        if count % _CHECK_EVERY == 0:
            budget.tick()
        yield item


def _sized(value: Any) -> int | None:
    return len(value) if isinstance(value, str | bytes | list | tuple) else None


class BoundedSandbox(ImmutableSandboxedEnvironment):
    """The immutable sandbox, with the budget checks described in the module docstring."""

    intercepted_binops = frozenset({"*", "**", "%"})

    def __init__(self) -> None:
        super().__init__(undefined=StrictUndefined, autoescape=False, keep_trailing_newline=True)
        self.globals[_ITERATE] = _iterate
        for name in _PADDING_FILTERS:
            self.filters[name] = _bounded_width(self.filters[name])
        self.filters["format"] = _bounded_format(self.filters["format"])
        self.filters["replace"] = _bounded_replace(self.filters["replace"])

    def _parse(self, source: str, name: str | None, filename: str | None) -> nodes.Template:
        tree = super()._parse(source, name, filename)
        for loop in tree.find_all(nodes.For):
            loop.iter = nodes.Call(nodes.Name(_ITERATE, "load"), [loop.iter], [], None, None)
        return tree

    def wrap_str_format(self, value: Any) -> Callable[..., str] | None:
        """``text.format(...)``: the sandbox's own wrapper, after a look at the widths."""
        wrapped = super().wrap_str_format(value)
        if wrapped is None:
            return None
        text: str = value.__self__

        def bounded(*args: Any, **kwargs: Any) -> str:
            budget = _BUDGET.get()
            if budget is not None:
                _check_format(budget, text)
            return wrapped(*args, **kwargs)

        return bounded

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        budget = _BUDGET.get()
        if budget is not None:
            budget.tick()
            if operator == "*":
                _check_repeat(budget, left, right)
            elif operator == "**":
                _check_power(budget, left, right)
            elif operator == "%" and isinstance(left, str):
                _check_format(budget, left)
        return super().call_binop(context, operator, left, right)

    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:
        budget = _BUDGET.get()
        if budget is not None:
            budget.tick()
            owner = getattr(__obj, "__self__", None)
            if isinstance(owner, str | bytes | list | tuple):
                for value in (*args, *kwargs.values()):  # ljust(10**9), zfill, expandtabs
                    if isinstance(value, int) and not isinstance(value, bool):
                        budget.allow_size(value)
                method = getattr(__obj, "__name__", "")
                if isinstance(owner, str) and method == "replace" and len(args) >= 2:
                    _check_replace(budget, owner, args[0], args[1])
        return super().call(__context, __obj, *args, **kwargs)


def _check_repeat(budget: Budget, left: Any, right: Any) -> None:
    for seq, times in ((left, right), (right, left)):
        size = _sized(seq)
        if size is not None and isinstance(times, int) and not isinstance(times, bool):
            budget.allow_size(size * max(times, 0))


def _check_power(budget: Budget, base: Any, exponent: Any) -> None:
    if isinstance(base, int) and isinstance(exponent, int) and abs(base) > 1 and exponent > 0:
        digits = exponent * math.log10(abs(base))
        budget.allow_size(digits)


def _check_format(budget: Budget, text: str) -> None:
    """A width or precision in a format (``%0999999999d``, ``{:>999999999}``) beyond the
    budget is refused before the text is built."""
    limit = len(str(budget.max_chars))
    for digits in _DIGITS.findall(text):
        if len(digits) > limit or int(digits) > budget.max_chars:
            shown = digits if len(digits) <= 12 else f"{digits[:12]}..."
            raise RenderLimitError(
                f"would format a field {shown} characters wide (limit {budget.max_chars:,})"
            )


def _check_replace(budget: Budget, text: Any, old: Any, new: Any) -> None:
    if isinstance(text, str) and isinstance(old, str) and isinstance(new, str):
        count = text.count(old) if old else len(text) + 1
        budget.allow_size(len(text) + count * max(0, len(new) - len(old)))


def _bounded_format(filter_function: Callable[..., Any]) -> Callable[..., Any]:
    def bounded(value: Any, *args: Any, **kwargs: Any) -> Any:
        budget = _BUDGET.get()
        if budget is not None and isinstance(value, str):
            _check_format(budget, value)
        return filter_function(value, *args, **kwargs)

    return bounded


def _bounded_replace(filter_function: Callable[..., Any]) -> Callable[..., Any]:
    def bounded(eval_ctx: Any, value: Any, old: Any, new: Any, *args: Any, **kwargs: Any) -> Any:
        budget = _BUDGET.get()
        if budget is not None:
            _check_replace(budget, value, old, new)
        return filter_function(eval_ctx, value, old, new, *args, **kwargs)

    bounded.jinja_pass_arg = filter_function.jinja_pass_arg  # type: ignore[attr-defined]
    return bounded


def _bounded_width(filter_function: Callable[..., Any]) -> Callable[..., Any]:
    """A padding filter that refuses a width beyond the budget before building the text."""

    def bounded(*args: Any, **kwargs: Any) -> Any:
        budget = _BUDGET.get()
        if budget is not None:
            for value in (*args[1:], *kwargs.values()):
                if isinstance(value, int) and not isinstance(value, bool):
                    budget.allow_size(value)
        return filter_function(*args, **kwargs)

    for attribute in ("jinja_pass_arg",):  # keep how Jinja calls the filter
        if hasattr(filter_function, attribute):
            setattr(bounded, attribute, getattr(filter_function, attribute))
    return bounded
