"""Long-term memory for agents: facts recalled into each run, learned after it.

`Memory` is a scope's facts in an `ItemStore` (text, a vector, and a JSON value), searched
by meaning and by words at once (hybrid search). Its scope is a namespace template such as
``("user", "{user_id}", "facts")``, filled from the run's ``tool_kwargs`` (what the caller
knows and the model can neither see nor forge) or ``arguments``: every read and write goes
to the store with that namespace, so the store's own query enforces it and one user's
facts never reach another's run. A template whose field is missing refuses the run. Run
on behalf of an owner (`cantata serve`'s identities, `cantata.core.owned_by`), the
namespace starts with ``@<owner>``: one client's memories are never another's.

`MemoryProvider` is the context provider: before a run it recalls the facts relevant to
the new input into the request; after it, given a chat client to extract with, it asks
that model (structured output) which facts the turn adds, changes or retracts and applies
them, a new fact nearly identical to a stored one replacing it rather than joining it.
Extraction runs inline (the run returns after it) or in the background (``wait=False``;
`MemoryProvider.drain` waits for what is in flight). `memory_tools` gives an agent that
manages memory itself ``remember``, ``recall`` and ``forget``. Inside a durable workflow
run every write is an effect, journaled: a run resumed after a crash writes it once.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import re
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, Field

from ..core import Message, UsageError, current_owner, new_id, tracing
from ..core.durable import current_effects
from ..models import ChatClient, ChatOptions
from ..models.embeddings import EmbeddingClient
from ..stores import ItemStore, Namespace, SearchHit
from ..tools import FunctionTool, ToolContext, tool
from .context_providers import ContextProvider, ContextRun

__all__ = ["Fact", "Memory", "MemoryOperation", "MemoryProvider", "MemoryUpdate", "memory_tools"]

_log = logging.getLogger("cantata.agents.memory")
_FIELD = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")

DUPLICATE_SIMILARITY = 0.92
"""A new fact at least this similar (cosine) to a stored one of its scope replaces it."""


@dataclass(frozen=True, slots=True)
class Fact:
    """One remembered fact: its key in the scope, its text, and its search score."""

    key: str
    text: str
    score: float = 0.0


class MemoryOperation(BaseModel):
    """One change the extracting model asks for."""

    op: Literal["add", "update", "delete"]
    fact: str = Field("", description="The fact, one short sentence (for add and update).")
    key: str = Field("", description="The key of the known fact (for update and delete).")


class MemoryUpdate(BaseModel):
    """What the extracting model answers: the changes a turn makes to what is known."""

    operations: list[MemoryOperation] = Field(default_factory=list)


class Memory:
    """The facts of one scope template in an item store, found by hybrid search."""

    def __init__(
        self,
        store: ItemStore,
        embedder: EmbeddingClient,
        scope: Sequence[str],
        *,
        ttl: float | None = None,
    ) -> None:
        parts = tuple(scope) if not isinstance(scope, str) else ()
        if not parts or not all(isinstance(p, str) and p for p in parts):
            raise UsageError(
                "a memory scope is a non-empty tuple of non-empty strings such as "
                f"('user', '{{user_id}}', 'facts'), got {scope!r:.100}"
            )
        self.store = store
        self.embedder = embedder
        self.scope: tuple[str, ...] = parts
        self.ttl = ttl

    def namespace(self, fields: Mapping[str, Any] | None = None) -> Namespace:
        """The scope with its ``{fields}`` filled; a missing field refuses. Run for an owner
        (`cantata.core.owned_by`: a served request of a named identity), it comes after
        ``@<owner>``, so no identity reaches another's facts, whatever the template."""
        given = fields or {}
        out: list[str] = []
        for part in self.scope:
            missing = [f for f in _FIELD.findall(part) if f not in given]
            if missing:
                raise UsageError(
                    f"memory scope {self.scope!r} needs {missing[0]!r}: pass "
                    f"tool_kwargs={{{missing[0]!r}: ...}} (or arguments=) to the run"
                )
            filled = _FIELD.sub(lambda m: str(given[m.group(1)]), part)
            if not filled:
                raise UsageError(f"memory scope {self.scope!r}: {part!r} filled in is empty")
            out.append(filled)
        owner = current_owner()  # a server's client: its memories are its own
        return tuple(out) if owner is None else (f"@{owner}", *out)

    async def remember(self, namespace: Namespace, text: str, *, key: str | None = None) -> str:
        """Store a fact (replacing the one at `key`); returns its key. Inside a durable
        workflow run the write is an effect: journaled, so a resumed run writes it once."""
        text = text.strip()
        if not text:
            raise UsageError("a fact to remember is empty")

        async def write(effect_key: str | None) -> str:
            # in a durable run the key comes from the effect's key, so a run that died
            # between the write and its journal entry writes the same item again, not a twin
            chosen = key or (_key_of(effect_key) if effect_key else new_id())
            (vector,) = await self.embedder.embed([text])
            value = {"fact": text, "at": time.time()}
            await self.store.put(namespace, chosen, value, text=text, vector=vector, ttl=self.ttl)
            return chosen

        return str(await _effect("memory.remember", write))

    async def recall(self, namespace: Namespace, query: str, *, limit: int = 5) -> list[Fact]:
        """The facts of `namespace` most relevant to `query`, best first."""
        query = query.strip()
        if not query:
            return []
        with tracing.span("memory.recall", {"cantata.memory.limit": limit}) as span:
            (vector,) = await self.embedder.embed([query])
            hits = await self.store.search(namespace, vector=vector, text=query, limit=limit)
            if span is not None:
                span.set_attribute("cantata.memory.hits", len(hits))
        return [_fact(h) for h in hits]

    async def forget(self, namespace: Namespace, key: str) -> bool:
        """Remove a fact; True if it was there (journaled in a durable run, as `remember`)."""

        async def remove(effect_key: str | None) -> bool:
            return await self.store.delete(namespace, key)

        return bool(await _effect("memory.forget", remove))

    async def facts(self, namespace: Namespace, *, limit: int = 100) -> list[Fact]:
        """The scope's facts, by key."""
        items = await self.store.list(namespace, limit=limit)
        return [Fact(i.key, str(i.value.get("fact", i.text or ""))) for i in items]

    async def apply(self, namespace: Namespace, update: MemoryUpdate) -> list[str]:
        """Apply what an extraction asked for; a new fact nearly the same as a stored one
        replaces it. Returns the keys written or removed."""
        touched: list[str] = []
        for op in update.operations:
            if op.op == "delete":
                if op.key and await self.forget(namespace, op.key):
                    touched.append(op.key)
                continue
            text = op.fact.strip()
            if not text:
                continue
            key: str | None = None
            if op.op == "update" and op.key:
                key = op.key
            else:
                (vector,) = await self.embedder.embed([text])
                near = await self.store.search(namespace, vector=vector, limit=1)
                if near and (near[0].similarity or 0.0) >= DUPLICATE_SIMILARITY:
                    key = near[0].item.key  # the same fact said again: merged, not added
            touched.append(await self.remember(namespace, text, key=key))
        return touched


async def _effect(name: str, fn: Callable[[str | None], Awaitable[Any]]) -> Any:
    """Run a memory write once per durable run: its result is journaled in the run's
    effect scope and comes back from there on a resume; outside a durable run, just run."""
    scope = current_effects()
    if scope is None:
        return await fn(None)
    key = scope.next_key(name)
    found, result = await scope.lookup(key)
    if found:
        return result
    return await scope.record(key, await fn(key))


def _key_of(effect_key: str) -> str:
    return hashlib.sha256(effect_key.encode()).hexdigest()[:24]


def _fact(hit: SearchHit) -> Fact:
    value = hit.item.value
    return Fact(hit.item.key, str(value.get("fact", hit.item.text or "")), hit.score)


_EXTRACT = """You keep the long-term memory of an assistant about its user.
Known facts (key: fact):
{known}

From the conversation turn that follows, list the changes to the known facts: "add" a new
fact the user stated about themselves or their wishes, "update" a known fact (give its
key) that changed, "delete" a known fact (give its key) the user retracted. Write facts as
short sentences in the third person. Ignore small talk; answer with no operations when
nothing is worth keeping."""


class MemoryProvider(ContextProvider):
    """Recalls a `Memory`'s relevant facts into each run; learns new ones after it.

    ``extractor`` is the chat client that extracts facts after a run (None: recall only,
    for agents that write with `memory_tools`); ``wait=False`` extracts in the background.
    Up to `limit` facts are recalled, by hybrid search on the run's new user input.
    """

    def __init__(
        self,
        memory: Memory,
        *,
        extractor: ChatClient | None = None,
        limit: int = 5,
        wait: bool = True,
        name: str = "memory",
        owns_store: bool = False,
    ) -> None:
        super().__init__(name)
        self.owns_store = owns_store
        """Whether `aclose` closes the memory's store too."""
        self.memory = memory
        self.extractor = extractor
        self.limit = limit
        self.wait = wait
        self._pending: set[asyncio.Task[None]] = set()

    def _namespace(self, run: ContextRun) -> Namespace:
        return self.memory.namespace({**run.arguments, **run.tool_kwargs})

    async def before_run(self, run: ContextRun) -> None:
        """Recall the facts relevant to the new input into the request's instructions."""
        namespace = self._namespace(run)
        query = " ".join(m.text for m in run.input if m.role == "user" and m.text)
        facts = await self.memory.recall(namespace, query, limit=self.limit)
        if facts:
            lines = "\n".join(f"- {f.text}" for f in facts)
            run.add_instructions(f"What you remember about the user:\n{lines}")

    async def after_run(self, run: ContextRun) -> None:
        """Extract what the turn taught (inline, or in the background)."""
        if self.extractor is None or run.response is None:
            return
        namespace = self._namespace(run)
        turn = [m for m in run.input if m.text] + [m for m in run.response.messages if m.text]
        if not any(m.role == "user" for m in turn):
            return
        if self.wait:
            await self._extract(namespace, turn)
            return
        task = asyncio.create_task(self._extract_logged(namespace, turn))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def _extract_logged(self, namespace: Namespace, turn: list[Message]) -> None:
        try:
            await self._extract(namespace, turn)
        except Exception:
            _log.exception("memory provider %r: background extraction failed", self.name)

    async def _extract(self, namespace: Namespace, turn: list[Message]) -> None:
        assert self.extractor is not None
        known = await self.memory.facts(namespace)
        listed = "\n".join(f"{f.key}: {f.text}" for f in known) or "(none)"
        said = "\n".join(f"{m.role}: {m.text}" for m in turn)
        with tracing.span("memory.extract", {"cantata.memory.known": len(known)}) as span:
            response = await self.extractor.get_response(
                [Message("system", _EXTRACT.format(known=listed)), Message("user", said)],
                options=ChatOptions(response_format=MemoryUpdate, temperature=0.0),
            )
            update = response.value
            if not isinstance(update, MemoryUpdate):
                update = MemoryUpdate.model_validate_json(response.text)
            touched = await self.memory.apply(namespace, update)
            if span is not None:
                span.set_attribute("cantata.memory.operations", len(update.operations))
                span.set_attribute("cantata.memory.written", len(touched))

    async def aclose(self) -> None:
        """Wait for background extractions (bounded), then close the store if owned."""
        await self.drain()
        if self.owns_store:
            await self.memory.store.close()

    async def drain(self, timeout: float = 30.0) -> None:  # noqa: ASYNC109 (a bound)
        """Wait, at most `timeout` seconds, for the background extractions in flight."""
        if self._pending:
            await asyncio.wait(set(self._pending), timeout=timeout)


def memory_tools(memory: Memory, *, limit: int = 5) -> list[FunctionTool]:
    """``remember``, ``recall`` and ``forget`` over `memory`, for an agent that manages its
    memory itself; the scope is filled from the run's ``tool_kwargs``."""

    @tool(name="remember")
    async def remember(fact: str, context: ToolContext) -> str:
        """Remember a fact about the user for later conversations.

        Args:
            fact: The fact, one short sentence.
        """
        key = await memory.remember(memory.namespace(context.kwargs), fact)
        return f"remembered as {key}"

    @tool(name="recall")
    async def recall(query: str, context: ToolContext) -> str:
        """Recall what is known about the user that bears on a query.

        Args:
            query: What to look for.
        """
        facts = await memory.recall(memory.namespace(context.kwargs), query, limit=limit)
        return "\n".join(f"{f.key}: {f.text}" for f in facts) or "nothing remembered"

    @tool(name="forget")
    async def forget(key: str, context: ToolContext) -> str:
        """Forget a remembered fact, by the key `recall` showed.

        Args:
            key: The fact's key.
        """
        gone = await memory.forget(memory.namespace(context.kwargs), key)
        return "forgotten" if gone else f"no fact has the key {key}"

    return [remember, recall, forget]
