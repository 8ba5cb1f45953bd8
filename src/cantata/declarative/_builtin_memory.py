"""Adapters of the memory and knowledge context providers.

A provider built from a config keeps that config, so the agent dumps as it was loaded;
one built in code holds live objects (a store, an embedding client) that a config cannot
name, and dumping it says so. ``learn: true`` extracts facts with the agent's own model.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..agents import Knowledge, KnowledgeProvider, Memory, MemoryProvider
from ..models.embeddings import (
    EmbeddingClient,
    HashEmbeddingClient,
    LocalEmbeddingClient,
    OpenAIEmbeddingClient,
)
from ..stores import open_item_store
from ._builtin_models import _fields, _typed
from .errors import SpecError
from .registry import ComponentAdapter, ConfigContext, register_component

__all__: list[str] = []

CONFIG_ATTR = "_cantata_config"
"""Where a provider built from a config keeps it."""
LEARN_ATTR = "_cantata_learns_with_agent_model"
"""Set on a memory provider whose config says ``learn: true``: the agent gives it its model."""


def embeddings_from_data(data: Any, where: str) -> EmbeddingClient:
    """``hash`` (deterministic), ``local`` (the embedded model), or a server's
    ``{base_url, model, api_key?, dimensions?}``."""
    if data in (None, "hash"):
        return HashEmbeddingClient()
    if data == "local":
        return LocalEmbeddingClient()
    if isinstance(data, Mapping):
        args = _fields(data, {"base_url", "model", "api_key", "dimensions"}, f"{where}.embeddings")
        _typed(args, {"base_url": str, "model": str, "api_key": str, "dimensions": int}, where)
        if "model" not in args:
            raise SpecError(f"{where}.embeddings: a server's embeddings need 'model'")
        return OpenAIEmbeddingClient(args.pop("model"), **args)
    raise SpecError(
        f"{where}: 'embeddings' is 'hash', 'local' or a mapping with base_url and model, "
        f"got {data!r:.80}"
    )


def _scope(data: Any, key: str, where: str) -> tuple[str, ...]:
    if not isinstance(data, list) or not data or not all(isinstance(p, str) and p for p in data):
        raise SpecError(f"{where}: {key!r} is a list of non-empty strings, got {data!r:.80}")
    return tuple(data)


def _dump(provider: Any, ctx: ConfigContext) -> dict[str, Any]:
    config = getattr(provider, CONFIG_ATTR, None)
    if config is None:
        raise SpecError(
            f"context provider {provider.name!r} was built in code around live objects (its "
            "store and embedding client), which a config cannot name; write its config in "
            "the spec instead",
            component=type(provider).__name__,
        )
    return dict(config)


def _store_args(
    config: Mapping[str, Any], allowed: set[str], types: dict[str, type], where: str, file: str
) -> dict[str, Any]:
    """A provider config's fields, checked: known names, their types, a store URL."""
    args = _fields(config, allowed, where)
    _typed(args, {"store": str, "limit": int, "name": str, **types}, where)
    if "store" not in args:
        raise SpecError(f"{where}: 'store' (an item store URL such as sqlite:///{file})")
    return args


_MEMORY = {"store", "scope", "embeddings", "learn", "limit", "name", "ttl"}


def _build_memory(config: Mapping[str, Any], ctx: ConfigContext) -> MemoryProvider:
    where = "cantata.agents.MemoryProvider"
    args = _store_args(config, _MEMORY, {"learn": bool}, where, "memory.db")
    ttl = args.get("ttl")
    if ttl is not None and (not isinstance(ttl, int | float) or ttl <= 0):
        raise SpecError(f"{where}: 'ttl' is a number of seconds, got {ttl!r:.40}")
    memory = Memory(
        open_item_store(args["store"]),
        embeddings_from_data(args.get("embeddings"), where),
        _scope(args.get("scope", ["user", "{user_id}", "facts"]), "scope", where),
        ttl=float(ttl) if ttl is not None else None,
    )
    provider = MemoryProvider(
        memory, limit=args.get("limit", 5), name=args.get("name", "memory"), owns_store=True
    )
    setattr(provider, CONFIG_ATTR, dict(config))
    setattr(provider, LEARN_ATTR, bool(args.get("learn", False)))
    return provider


_KNOWLEDGE = {"store", "collection", "embeddings", "limit", "name", "files"}


def _build_knowledge(config: Mapping[str, Any], ctx: ConfigContext) -> KnowledgeProvider:
    where = "cantata.agents.KnowledgeProvider"
    args = _store_args(config, _KNOWLEDGE, {"files": list}, where, "knowledge.db")
    files = args.get("files", [])
    if not all(isinstance(f, str) and f for f in files):
        raise SpecError(f"{where}: 'files' is a list of paths")
    knowledge = Knowledge(
        open_item_store(args["store"]),
        embeddings_from_data(args.get("embeddings"), where),
        _scope(args.get("collection", ["knowledge", "default"]), "collection", where),
    )
    provider = KnowledgeProvider(
        knowledge,
        limit=args.get("limit", 4),
        name=args.get("name", "knowledge"),
        files=files,
        owns_store=True,
    )
    setattr(provider, CONFIG_ATTR, dict(config))
    return provider


def _register() -> None:
    register_component(
        ComponentAdapter("cantata.agents.MemoryProvider", "context_provider", MemoryProvider,
                         _dump, _build_memory)
    )  # fmt: skip
    register_component(
        ComponentAdapter("cantata.agents.KnowledgeProvider", "context_provider",
                         KnowledgeProvider, _dump, _build_knowledge)
    )  # fmt: skip


_register()
