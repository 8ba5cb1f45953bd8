"""Adapters of the model clients (and stores, which are as small)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..models import LocalChatClient, ScriptedChatClient, tool_call
from ..stores import MemoryStore, SQLiteStore
from .errors import SpecError
from .options import options_from_data, options_to_data
from .registry import ComponentAdapter, ConfigContext, register_component

__all__: list[str] = []

_OPENAI = "cantata.models.OpenAIChatClient"
_SECRET_ENV = "OPENAI_API_KEY"


def _fields(
    config: Mapping[str, Any],
    allowed: set[str],
    where: str,
    *,
    required: frozenset[str] | set[str] = frozenset(),
) -> dict[str, Any]:
    unknown = sorted(set(map(str, config)) - allowed)
    if unknown:
        raise SpecError(f"{where}: unknown field(s) {unknown}; known: {sorted(allowed)}")
    missing = sorted(n for n in required if config.get(n) is None)
    if missing:
        raise SpecError(f"{where}: missing field(s) {missing}")
    return dict(config)


def _dump_openai(obj: Any, ctx: ConfigContext) -> dict[str, Any]:
    out: dict[str, Any] = {
        "model": obj.model,
        "base_url": obj.base_url,
        "timeout": obj.timeout,
        "max_retries": obj.max_retries,
        "structured_output": obj.structured_output,
        "max_tokens_field": obj.max_tokens_field,
        "default_options": options_to_data(obj.default_options, where=_OPENAI),
    }
    if ctx.include_secrets:  # the place of the key, never the key
        out["api_key"] = "${Env:" + _SECRET_ENV + "}"
    return out


def _build_openai(config: Mapping[str, Any], ctx: ConfigContext) -> Any:
    from ..models import OpenAIChatClient

    allowed = {
        "model", "base_url", "api_key", "timeout", "max_retries", "structured_output",
        "max_tokens_field", "default_options",
    }  # fmt: skip
    args = _fields(config, allowed, _OPENAI, required={"model"})
    args["default_options"] = options_from_data(args.get("default_options"), where=_OPENAI)
    _typed(args, {"model": str, "base_url": str, "api_key": str}, _OPENAI)
    return OpenAIChatClient(**args)


class _ModelName:
    """Stands for a model named ``provider:model`` in configs: built by `resolve_model`; the
    client it builds dumps as its own class."""


def _build_named(config: Mapping[str, Any], ctx: ConfigContext) -> Any:
    from ..core import ConfigurationError
    from ..models import resolve_model

    where = "cantata.models.resolve_model"
    args = _fields(config, {"name", "base_url", "api_key", "timeout", "default_options"}, where,
                   required={"name"})  # fmt: skip
    _typed(args, {"name": str, "base_url": str, "api_key": str, "timeout": float}, where)
    args["default_options"] = options_from_data(args.get("default_options"), where=where)
    name = args.pop("name")
    try:
        return resolve_model(name, **args)
    except ConfigurationError as exc:
        raise SpecError(f"model {name!r}: {exc}") from exc


def _dump_named(obj: Any, ctx: ConfigContext) -> dict[str, Any]:
    raise SpecError("a model name resolves to a client, which dumps as its own class")


def _dump_anthropic(obj: Any, ctx: ConfigContext) -> dict[str, Any]:
    where = "cantata.models.AnthropicChatClient"
    out: dict[str, Any] = {
        "model": obj.model,
        "base_url": obj.base_url,
        "timeout": obj.timeout,
        "max_retries": obj.max_retries,
        "max_tokens": obj.max_tokens,
        "prompt_caching": obj.prompt_caching,
        "thinking_budget": obj.thinking_budget,
        "structured_output": obj.structured_output,
        "parallel_tool_calls": obj.parallel_tool_calls,
        "default_options": options_to_data(obj.default_options, where=where),
    }
    if ctx.include_secrets:
        out["api_key"] = "${Env:ANTHROPIC_API_KEY}"
    return out


def _build_anthropic(config: Mapping[str, Any], ctx: ConfigContext) -> Any:
    from ..models import AnthropicChatClient

    where = "cantata.models.AnthropicChatClient"
    allowed = {
        "model", "base_url", "api_key", "timeout", "max_retries", "max_tokens", "prompt_caching",
        "thinking_budget", "structured_output", "parallel_tool_calls", "default_options",
    }  # fmt: skip
    args = _fields(config, allowed, where, required={"model"})
    args["default_options"] = options_from_data(args.get("default_options"), where=where)
    _typed(args, {"model": str, "base_url": str, "api_key": str, "max_tokens": int}, where)
    _typed(args, {"prompt_caching": bool, "parallel_tool_calls": bool}, where)
    return AnthropicChatClient(**args)


def _dump_azure(obj: Any, ctx: ConfigContext) -> dict[str, Any]:
    out: dict[str, Any] = {
        "deployment": obj.model,
        "endpoint": obj.endpoint,
        "api_version": obj.api_version,
        "timeout": obj.timeout,
        "max_retries": obj.max_retries,
        "default_options": options_to_data(obj.default_options, where="AzureOpenAIChatClient"),
    }
    if obj.endpoint is None:
        out["base_url"] = obj.base_url
    if obj.token_provider is not None:
        raise SpecError(
            "an AzureOpenAIChatClient with a token_provider= (a function) is not written to "
            "configs; build it in code"
        )
    if ctx.include_secrets:
        out["api_key"] = "${Env:AZURE_OPENAI_API_KEY}"
    return out


def _build_azure(config: Mapping[str, Any], ctx: ConfigContext) -> Any:
    from ..models import AzureOpenAIChatClient

    where = "cantata.models.AzureOpenAIChatClient"
    allowed = {
        "deployment", "endpoint", "api_version", "api_key", "base_url", "timeout",
        "max_retries", "default_options",
    }  # fmt: skip
    args = _fields(config, allowed, where, required={"deployment"})
    args["default_options"] = options_from_data(args.get("default_options"), where=where)
    _typed(args, {"deployment": str, "endpoint": str, "api_version": str, "api_key": str}, where)
    return AzureOpenAIChatClient(args.pop("deployment"), **args)


def _typed(args: Mapping[str, Any], kinds: Mapping[str, type], where: str) -> None:
    for key, kind in kinds.items():
        value = args.get(key)
        ok: tuple[type, ...] = (int, float) if kind is float else (kind,)
        if value is not None and (
            isinstance(value, bool) != (kind is bool) or not isinstance(value, ok)
        ):
            raise SpecError(f"{where}: {key!r} must be {kind.__name__}, got {value!r:.80}")


def _dump_local(obj: LocalChatClient, ctx: ConfigContext) -> dict[str, Any]:
    key = obj._key  # the client's settings, read-only
    return {
        "model_path": key.path or None,
        "n_ctx": key.n_ctx,
        "n_threads": key.n_threads,
        "seed": key.seed,
        "chat_format": key.chat_format,
        "parallel": key.parallel,
        "default_options": options_to_data(obj.default_options, where="LocalChatClient"),
    }


def _build_local(config: Mapping[str, Any], ctx: ConfigContext) -> LocalChatClient:
    where = "cantata.models.LocalChatClient"
    allowed = {"model_path", "n_ctx", "n_threads", "seed", "chat_format", "parallel"}
    args = _fields(config, allowed | {"default_options"}, where)
    _typed(args, {"model_path": str, "n_ctx": int, "n_threads": int, "seed": int}, where)
    _typed(args, {"chat_format": str, "parallel": int}, where)
    args["default_options"] = options_from_data(args.get("default_options"), where=where)
    return LocalChatClient(**args)


def _build_scripted(config: Mapping[str, Any], ctx: ConfigContext) -> ScriptedChatClient:
    where = "cantata.models.ScriptedChatClient"
    args = _fields(config, {"script", "model"}, where)
    script = args.get("script", [])
    if not isinstance(script, list):
        raise SpecError(f"{where}: 'script' must be a list of answer texts or tool calls")
    model = args.get("model", "scripted")
    _typed(args, {"model": str}, where)
    return ScriptedChatClient([_turn(s, where) for s in script], model=model)


def _turn(item: Any, where: str) -> Any:
    if isinstance(item, str):
        return item
    if (
        isinstance(item, Mapping)
        and set(item) <= {"tool", "arguments"}
        and isinstance(item.get("tool"), str)
        and isinstance(item.get("arguments", {}), Mapping)
    ):
        return tool_call(item["tool"], dict(item.get("arguments", {})))
    raise SpecError(f"{where}: a script turn is a text or {{tool: name, arguments: {{...}}}}")


def _dump_scripted(obj: ScriptedChatClient, ctx: ConfigContext) -> dict[str, Any]:
    raise SpecError(
        "a ScriptedChatClient's script (texts or a function) is not written to configs; "
        "write its spec by hand with model: {api: scripted, connection: {script: [...]}}"
    )


def _build_memory(config: Mapping[str, Any], ctx: ConfigContext) -> MemoryStore:
    _fields(config, set(), "cantata.stores.MemoryStore")
    return MemoryStore()


def _build_sqlite(config: Mapping[str, Any], ctx: ConfigContext) -> SQLiteStore:
    where = "cantata.stores.SQLiteStore"
    args = _fields(config, {"path"}, where)
    if not isinstance(args.get("path"), str):
        raise SpecError(f"{where}: 'path' must be a file path string")
    return SQLiteStore(args["path"])


def _build_file_checkpoints(config: Mapping[str, Any], ctx: ConfigContext) -> Any:
    from ..workflows import FileCheckpointStore

    where = "cantata.workflows.FileCheckpointStore"
    args = _fields(config, {"directory"}, where, required={"directory"})
    _typed(args, {"directory": str}, where)
    return FileCheckpointStore(args["directory"])


def _build_memory_checkpoints(config: Mapping[str, Any], ctx: ConfigContext) -> Any:
    from ..workflows import InMemoryCheckpointStore

    _fields(config, set(), "cantata.workflows.InMemoryCheckpointStore")
    return InMemoryCheckpointStore()


def _register_checkpoint_stores() -> None:
    from ..workflows import FileCheckpointStore, InMemoryCheckpointStore

    register_component(
        ComponentAdapter("cantata.workflows.FileCheckpointStore", "checkpoint_store",
                         FileCheckpointStore, lambda o, c: {"directory": str(o.directory)},
                         _build_file_checkpoints)
    )  # fmt: skip
    register_component(
        ComponentAdapter("cantata.workflows.InMemoryCheckpointStore", "checkpoint_store",
                         InMemoryCheckpointStore, lambda o, c: {}, _build_memory_checkpoints)
    )  # fmt: skip


def _register() -> None:
    from ..models import azure_openai, openai_chat

    register_component(
        ComponentAdapter(_OPENAI, "model", openai_chat.OpenAIChatClient, _dump_openai,
                         _build_openai)
    )  # fmt: skip
    register_component(
        ComponentAdapter("cantata.models.AzureOpenAIChatClient", "model",
                         azure_openai.AzureOpenAIChatClient, _dump_azure, _build_azure)
    )  # fmt: skip
    register_component(
        ComponentAdapter("cantata.models.resolve_model", "model", _ModelName, _dump_named,
                         _build_named)
    )  # fmt: skip
    _register_anthropic()
    register_component(
        ComponentAdapter("cantata.models.LocalChatClient", "model", LocalChatClient,
                         _dump_local, _build_local)
    )  # fmt: skip
    register_component(
        ComponentAdapter("cantata.models.ScriptedChatClient", "model", ScriptedChatClient,
                         _dump_scripted, _build_scripted)
    )  # fmt: skip
    register_component(
        ComponentAdapter("cantata.stores.MemoryStore", "store", MemoryStore,
                         lambda o, c: {}, _build_memory)
    )  # fmt: skip
    register_component(
        ComponentAdapter("cantata.stores.SQLiteStore", "store", SQLiteStore,
                         lambda o, c: {"path": o.path}, _build_sqlite)
    )  # fmt: skip


def _register_anthropic() -> None:
    """The Anthropic client's adapter, when its SDK is installed (it is an extra)."""
    try:
        from ..models import anthropic
    except ImportError:  # pragma: no cover - the anthropic extra is not installed
        return
    register_component(
        ComponentAdapter("cantata.models.AnthropicChatClient", "model",
                         anthropic.AnthropicChatClient, _dump_anthropic, _build_anthropic)
    )  # fmt: skip


_register()
_register_checkpoint_stores()
