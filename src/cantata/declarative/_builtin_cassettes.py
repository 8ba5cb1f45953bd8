"""Adapters of the cassette clients: `RecordingChatClient` (its inner client and the file
it writes) and `ReplayChatClient` (its cassette, written inline as the cassette's own JSON,
or read from a file named by ``path``). A cassette is data read through the type registry,
so loading one runs nothing; what a recorder has recorded so far is a run's, not part of its
definition, and is not written.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..core import CantataError
from ..models import Cassette, RecordingChatClient, ReplayChatClient
from ._builtin_models import _fields, _typed
from .errors import SpecError
from .registry import ComponentAdapter, ConfigContext, _dump, build, register_component

__all__: list[str] = []

_RECORDING = "cantata.models.RecordingChatClient"
_REPLAY = "cantata.models.ReplayChatClient"


def _dump_recording(client: RecordingChatClient, ctx: ConfigContext) -> dict[str, Any]:
    return {"inner": _dump(client.inner, ctx), "path": str(client.path)}


def _build_recording(config: Mapping[str, Any], ctx: ConfigContext) -> RecordingChatClient:
    args = _fields(config, {"inner", "path"}, _RECORDING, required={"inner", "path"})
    _typed(args, {"path": str}, _RECORDING)
    inner = build(args["inner"], ctx, where=f"{_RECORDING}.inner")
    return RecordingChatClient(inner, args["path"])


def _dump_replay(client: ReplayChatClient, ctx: ConfigContext) -> dict[str, Any]:
    return {
        "cassette": json.loads(client.cassette.dumps()),
        "check_requests": client.check_requests,
    }


def _build_replay(config: Mapping[str, Any], ctx: ConfigContext) -> ReplayChatClient:
    args = _fields(config, {"cassette", "path", "check_requests"}, _REPLAY)
    _typed(args, {"path": str, "check_requests": bool, "cassette": dict}, _REPLAY)
    if ("cassette" in args) == ("path" in args):
        raise SpecError(f"{_REPLAY}: give exactly one of 'cassette' (its JSON) or 'path'")
    try:
        cassette = (
            Cassette.loads(json.dumps(args["cassette"]))
            if "cassette" in args
            else Cassette.load(args["path"])
        )
    except CantataError:
        raise
    except (OSError, ValueError) as exc:  # a path that is no readable text file
        raise SpecError(f"{_REPLAY}: the cassette cannot be read: {exc}") from exc
    return ReplayChatClient(cassette, check_requests=args.get("check_requests", True))


register_component(
    ComponentAdapter(_RECORDING, "model", RecordingChatClient, _dump_recording,
                     _build_recording)
)  # fmt: skip
register_component(
    ComponentAdapter(_REPLAY, "model", ReplayChatClient, _dump_replay, _build_replay)
)
