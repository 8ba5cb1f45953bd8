"""Assemble streamed tool-call deltas into whole `FunctionCallContent`s."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ..core import FunctionCallContent, new_id
from ._openai_mapping import parse_arguments


@dataclass(slots=True)
class _Partial:
    call_id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


class ToolCallAssembler:
    """Collects deltas by index; a call is complete once a later index starts or the stream ends.

    Servers differ: OpenAI sends the id and name once, llama.cpp repeats them on every
    delta; a repeated name is not appended twice.
    """

    def __init__(self) -> None:
        self._partials: dict[int, _Partial] = {}
        self._emitted: set[int] = set()

    def add(
        self, index: int, *, call_id: str | None, name: str | None, arguments: str | None
    ) -> list[FunctionCallContent]:
        """Feed one delta; returns the calls that this delta shows to be complete."""
        partial = self._partials.get(index)
        if partial is None:
            partial = self._partials[index] = _Partial()
        if call_id and not partial.call_id:
            partial.call_id = call_id
        if name and name != partial.name:
            partial.name = name if not partial.name else partial.name + name
        if arguments:
            partial.arguments.append(arguments)
        return self._take(lambda i: i < index)

    def finish(self) -> list[FunctionCallContent]:
        """Every call not yet emitted, in index order."""
        return self._take(lambda i: True)

    def _take(self, ready: Callable[[int], bool]) -> list[FunctionCallContent]:
        done: list[FunctionCallContent] = []
        for i in sorted(self._partials):
            if i in self._emitted or not ready(i):
                continue
            self._emitted.add(i)
            p = self._partials[i]
            done.append(
                FunctionCallContent(
                    p.call_id or f"call_{new_id()[:12]}",
                    p.name,
                    parse_arguments("".join(p.arguments)),
                )
            )
        return done
