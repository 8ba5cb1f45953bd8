"""Context providers: what an agent is told before each run, and sees after it.

A `ContextProvider` is shared by every conversation of an agent (memory, knowledge, a
user's profile, the time of day). Before a run it may add instructions, messages and tools
to that run's model request; after the run it sees the input, the answer and the error if
the run failed. Providers run in the order they are given, one pipeline for every run of
the agent, whether run, streamed, inside a workflow or as a team participant.

What a provider adds is attributed to it by its `name`: added messages carry it as their
author and under `CONTEXT_SOURCE_KEY` in their metadata, every run's `AgentResponse.context` lists
what each provider added, and with tracing on each provider call is a span. Additions go
into the request only; the thread records them only when the provider asks
(``keep=True``), so a recalled fact is not stored again with every turn.

What a provider keeps per conversation lives in the thread: `ContextRun.state` is that
provider's JSON object inside ``thread.context_state``, serialized with the thread and
kept beside its messages when they live in a `StateStore`, so a conversation resumed in
another process finds it. Message stores and history reducers stay as they are: the
thread's own history is the conversation, and providers add to it rather than replace it
(one pipeline, history first, then what providers add, then the new input).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from ..core import AgentError, ConfigurationError, Message, tracing
from .response import ContextAddition

if TYPE_CHECKING:
    from ..tools import FunctionTool
    from .agent import Agent
    from .response import AgentResponse
    from .thread import AgentThread
    from .tool_like import ToolLike

__all__ = [
    "CONTEXT_SOURCE_KEY",
    "ContextAddition",
    "ContextProvider",
    "ContextProviderError",
    "ContextRun",
]

CONTEXT_SOURCE_KEY = "context_source"
"""Metadata key of a message a context provider added: the provider's name."""

_NAME = re.compile(r"[A-Za-z0-9_.:-]{1,64}")
_log = logging.getLogger("cantata.agents.context")


class ContextProviderError(AgentError):
    """A context provider failed (its `on_error` is ``"fail"``), or what it keeps per
    conversation is not JSON; the run does not start, or its answer is not recorded."""

    def __init__(self, message: str, *, source: str) -> None:
        super().__init__(message)
        self.source = source


class ContextRun:
    """One run as a provider sees it: add to the request before, read the outcome after."""

    __slots__ = (
        "_addition",
        "_tools",
        "agent",
        "arguments",
        "error",
        "input",
        "response",
        "state",
        "thread",
        "tool_kwargs",
    )

    def __init__(
        self,
        agent: Agent,
        thread: AgentThread,
        input: Sequence[Message],
        state: dict[str, Any],
        addition: ContextAddition,
        *,
        arguments: Mapping[str, Any] | None = None,
        tool_kwargs: Mapping[str, Any] | None = None,
    ) -> None:
        self.agent = agent
        self.arguments: Mapping[str, Any] = MappingProxyType(dict(arguments or {}))
        """The run's template arguments (``arguments=``), read only."""
        self.tool_kwargs: Mapping[str, Any] = MappingProxyType(dict(tool_kwargs or {}))
        """The run's ``tool_kwargs`` (what the caller knows, such as a user id, and the
        model cannot see or forge), read only."""
        self.thread = thread
        self.input: tuple[Message, ...] = tuple(input)
        """The run's new messages (read only; the thread holds the rest)."""
        self.state = state
        """This provider's own JSON object for this conversation (kept in the thread)."""
        self.response: AgentResponse | None = None
        """The answer, after the run (None before it, and after a failed run)."""
        self.error: BaseException | None = None
        """Why the run failed, after a failed run."""
        self._addition = addition
        self._tools: list[ToolLike] = []

    @property
    def source(self) -> str:
        """The name of the provider this view belongs to."""
        return self._addition.source

    def add_instructions(self, text: str) -> None:
        """Add instructions for this run's model request (a system message after the
        agent's own instructions)."""
        if not isinstance(text, str):
            raise ContextProviderError(
                f"context provider {self.source!r}: instructions must be text, got "
                f"{type(text).__name__}",
                source=self.source,
            )
        if text:
            self._addition.instructions.append(text)

    def add_messages(self, messages: Message | Iterable[Message], *, keep: bool = False) -> None:
        """Add messages to this run's request, before the new input; with ``keep=True``
        the thread records them too (before the input), so later runs see them."""
        batch = [messages] if isinstance(messages, Message) else list(messages)
        out: list[Message] = []
        for m in batch:
            if not isinstance(m, Message):
                raise ContextProviderError(
                    f"context provider {self.source!r}: add_messages takes Messages, got "
                    f"{type(m).__name__}",
                    source=self.source,
                )
            out.append(
                m.copy(
                    author_name=m.author_name or self.source,
                    metadata={**m.metadata, CONTEXT_SOURCE_KEY: self.source},
                )
            )
        (self._addition.kept if keep else self._addition.messages).extend(out)

    def _discard(self) -> None:
        """Forget what the provider added to this run (it failed and is skipped)."""
        self._tools.clear()
        self._addition.instructions.clear()
        self._addition.messages.clear()
        self._addition.kept.clear()

    def add_tools(self, tools: Iterable[ToolLike]) -> None:
        """Offer tools for this run only (beside the agent's own and the call's): typed
        functions, `FunctionTool`s, agents or plugins, as an agent's ``tools=`` takes."""
        self._tools.extend(tools)


class ContextProvider:
    """Base of a context provider: override `before_run`, `after_run`, or both.

    `name` attributes what the provider adds (required, unique among an agent's
    providers: letters, digits, ``_ . : -``). `on_error` decides what a failure of the
    provider does: ``"fail"`` (the default) fails the run with `ContextProviderError`;
    ``"skip"`` logs it, leaves the provider out of this run and says so in
    `AgentResponse.context`.
    """

    name: str = ""
    on_error: ClassVar[Literal["fail", "skip"]] = "fail"

    def __init__(self, name: str | None = None) -> None:
        if name is not None:
            self.name = name

    async def before_run(self, run: ContextRun) -> None:
        """Add to the request: `run.add_instructions`, `add_messages`, `add_tools`."""

    async def after_run(self, run: ContextRun) -> None:
        """See the outcome: `run.input`, `run.response` or `run.error`, and `run.state`."""

    async def aclose(self) -> None:
        """Release what the provider holds (an agent that owns it calls this on close)."""


def check_providers(
    providers: Iterable[ContextProvider], *, owner: str
) -> tuple[ContextProvider, ...]:
    """`providers` checked: each a `ContextProvider` with a valid, unique name."""
    out = tuple(providers)
    seen: set[str] = set()
    for p in out:
        if not isinstance(p, ContextProvider):
            raise ConfigurationError(
                f"agent `{owner}`: context provider {p!r:.80} is not a ContextProvider; "
                "subclass cantata.agents.ContextProvider"
            )
        name = p.name
        if type(name) is not str or not _NAME.fullmatch(name):
            raise ConfigurationError(
                f"agent `{owner}`: context provider {type(p).__name__} needs a name of 1-64 "
                f"letters, digits or _ . : - (got {name!r:.80}); it attributes what it adds"
            )
        if name in seen:
            raise ConfigurationError(
                f"agent `{owner}`: two context providers are named {name!r}; give each its own"
            )
        if p.on_error not in ("fail", "skip"):
            raise ConfigurationError(
                f"agent `{owner}`: context provider {name!r} has on_error={p.on_error!r}; "
                "use 'fail' or 'skip'"
            )
        seen.add(name)
    return out


class Pipeline:
    """The providers of one run: `before` fills the request, `after` reports the outcome."""

    __slots__ = ("_providers", "_runs", "additions", "thread")

    def __init__(
        self,
        providers: Sequence[ContextProvider],
        agent: Agent,
        thread: AgentThread,
        input: Sequence[Message],
        *,
        arguments: Mapping[str, Any] | None = None,
        tool_kwargs: Mapping[str, Any] | None = None,
    ) -> None:
        self._providers = providers
        self.thread = thread
        state = thread.context_state
        self.additions = [ContextAddition(p.name) for p in providers]
        self._runs = [
            ContextRun(
                agent,
                thread,
                input,
                _own_state(state, p.name),
                a,
                arguments=arguments,
                tool_kwargs=tool_kwargs,
            )
            for p, a in zip(providers, self.additions, strict=True)
        ]

    async def before(self) -> None:
        for provider, run in zip(self._providers, self._runs, strict=True):
            try:
                with _span(provider, "before"):
                    await provider.before_run(run)
            except Exception as exc:
                self._failed(provider, run, exc, "before the run")
                run._discard()  # skipped: nothing it added so far goes into the request

    async def after(self, response: AgentResponse | None, error: BaseException | None) -> None:
        for provider, run in zip(self._providers, self._runs, strict=True):
            if run._addition.skipped is not None:
                continue
            run.response, run.error = response, error
            try:
                with _span(provider, "after"):
                    await provider.after_run(run)
            except Exception as exc:
                if error is not None:  # the run's own failure is what the caller sees
                    _log.warning(
                        "context provider %r failed after a failed run: %r", provider.name, exc
                    )
                    continue
                self._failed(provider, run, exc, "after the run")

    def _failed(
        self, provider: ContextProvider, run: ContextRun, exc: Exception, when: str
    ) -> None:
        why = f"{type(exc).__name__}: {exc}"
        if provider.on_error == "skip":
            _log.warning("context provider %r failed %s, skipped: %s", provider.name, when, why)
            run._addition.skipped = why
            return
        raise ContextProviderError(
            f"context provider {provider.name!r} failed {when}: {why} (set its "
            "on_error='skip' to run without it when it fails)",
            source=provider.name,
        ) from exc

    @property
    def instructions(self) -> list[Message]:
        return [
            Message("system", text, author_name=a.source, metadata={CONTEXT_SOURCE_KEY: a.source})
            for a in self.additions
            for text in a.instructions
        ]

    @property
    def messages(self) -> list[Message]:
        return [m for a in self.additions for m in a.messages]

    @property
    def kept(self) -> list[Message]:
        return [m for a in self.additions for m in a.kept]

    def tools(
        self, convert: Callable[[list[ToolLike], str], Sequence[FunctionTool]]
    ) -> list[FunctionTool]:
        """The tools the providers offered, made `FunctionTool`s by `convert` (the
        agent's own conversion, owned by each provider), their names in the additions."""
        out: list[FunctionTool] = []
        for run in self._runs:
            if run._tools:
                made = convert(run._tools, run.source)
                run._addition.tools.extend(t.name for t in made)
                out.extend(made)
        return out


def _span(provider: ContextProvider, step: str) -> Any:
    return tracing.span(
        f"context_provider {provider.name}",
        {"cantata.context.source": provider.name, "cantata.context.step": step},
    )


def _own_state(state: dict[str, Any], name: str) -> dict[str, Any]:
    own = state.get(name)
    if type(own) is not dict:
        own = state[name] = {}
    return own
