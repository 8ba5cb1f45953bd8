"""One worker process of `cantata serve --workers N`: `serve_workers` starts N processes on
one socket, and each builds the app here from the command's options (passed in the environment,
as JSON under `CONFIG_VARIABLE`), loading the served target anew.

Nothing a client may come back to lives in a worker: threads, response ids, A2A tasks and
waiting sessions are in the store they all share, so any worker answers any request.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["CONFIG_VARIABLE", "WorkerConfig", "create_app"]

CONFIG_VARIABLE = "CANTATA_SERVE_WORKER"
"""The environment variable holding a worker's `WorkerConfig` as JSON."""


@dataclass(frozen=True, slots=True)
class WorkerConfig:
    """What every worker needs to build the same app."""

    target: str
    store: str
    token: str | None = None
    settings: dict[str, str] = field(default_factory=dict)
    allow: list[str] = field(default_factory=list)
    cwd: str = ""
    limits: dict[str, Any] = field(default_factory=dict)
    """`cantata.serve.Limits` as keywords: the same bounds in every worker."""
    log_level: str = "info"

    def to_env(self) -> str:
        """The config as the environment variable's value."""
        return json.dumps(asdict(self))


def load_served(target: str, settings: dict[str, str], allow: list[str]) -> Any:
    """What `target` names: a spec file (loaded with `settings` and `allow`) or
    module:object (found from the working directory too)."""
    from ..core import UsageError
    from ..declarative import SPEC_SUFFIXES, load
    from ..serve import load_target

    if "" not in sys.path:
        sys.path.insert(0, "")  # module:object names modules of the working directory
    if target.endswith(SPEC_SUFFIXES):
        return load(target, settings=settings, allow=allow)
    if settings or allow:
        raise UsageError("--setting and --allow are for spec files (.yaml, .yml, .json)")
    return load_target(target)


def create_app() -> Any:
    """The ASGI app of one worker (uvicorn's app factory)."""
    from ..serve import Limits, build_app
    from ..serve.drain import process_drain
    from ..serve.server import prepare_process

    raw = os.environ.get(CONFIG_VARIABLE)
    if not raw:
        raise RuntimeError(
            f"{CONFIG_VARIABLE} is not set: this factory is for `cantata serve --workers N`"
        )
    config = WorkerConfig(**json.loads(raw))
    if config.cwd:
        os.chdir(config.cwd)
    served = load_served(config.target, config.settings, config.allow)
    limits = Limits(**config.limits)
    prepare_process(config.log_level)
    return build_app(
        served, store=config.store, token=config.token, limits=limits, drain=process_drain()
    )
