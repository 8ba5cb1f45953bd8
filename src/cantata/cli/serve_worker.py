"""One worker process of `cantata serve --workers N`: `serve_workers` starts N processes on
one socket, and each builds the app here from the command's options (passed in the environment,
as JSON under `CONFIG_VARIABLE`), loading the served target anew.

Nothing a client may come back to lives in a worker: threads, response ids, A2A tasks and
waiting sessions are in the store they all share, so any worker answers any request.

A worker ends with its parent, however the parent ends (even ``kill -9``, which it cannot
pass on): otherwise the orphans keep serving, and a process manager that restarts the parent
runs a second set beside them on the same store. On Linux the kernel sends the worker SIGTERM
when the parent dies (``PR_SET_PDEATHSIG``); elsewhere a thread watches the parent's pid.
SIGTERM is the ordinary stop: the worker stops accepting at once and drains what it runs.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import sys
import threading
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["CONFIG_VARIABLE", "WorkerConfig", "create_app", "end_with_parent"]

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
    parent: int = 0
    """The pid of the `cantata serve` process the worker ends with (0: none to watch)."""
    allowed_hosts: list[str] = field(default_factory=list)
    cors_origins: list[str] = field(default_factory=list)
    public_url: str | None = None
    keys_file: str | None = None
    """Read by each worker itself: the keys never pass through the environment."""
    trust_identity_header: str | None = None
    trusted_proxies: list[str] = field(default_factory=list)

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


_PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>
_WATCH_EVERY = 0.5  # seconds between looks at the parent where the kernel cannot tell us


def end_with_parent(parent: int) -> None:
    """Have this process get SIGTERM when `parent` (its parent now) ends, however it ends."""
    if sys.platform.startswith("linux") and _ask_kernel():
        if os.getppid() != parent:  # it ended before the kernel was asked
            os.kill(os.getpid(), signal.SIGTERM)
        return
    if sys.platform == "win32":  # pragma: no cover - no parent pid to watch there
        return

    def watch() -> None:
        while os.getppid() == parent:
            threading.Event().wait(_WATCH_EVERY)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="cantata-parent-watch", daemon=True).start()


def _ask_kernel() -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0) == 0)
    except (OSError, AttributeError):  # no prctl in this libc: the watching thread does it
        return False


def create_app() -> Any:
    """The ASGI app of one worker (uvicorn's app factory)."""
    from ..serve import Limits, build_app, read_keys_file
    from ..serve.drain import process_drain
    from ..serve.server import prepare_process

    raw = os.environ.get(CONFIG_VARIABLE)
    if not raw:
        raise RuntimeError(
            f"{CONFIG_VARIABLE} is not set: this factory is for `cantata serve --workers N`"
        )
    config = WorkerConfig(**json.loads(raw))
    if config.parent:
        end_with_parent(config.parent)
    if config.cwd:
        os.chdir(config.cwd)
    served = load_served(config.target, config.settings, config.allow)
    limits = Limits(**config.limits)
    prepare_process(config.log_level)
    return build_app(
        served,
        store=config.store,
        token=config.token,
        limits=limits,
        drain=process_drain(),
        allowed_hosts=config.allowed_hosts,
        cors_origins=config.cors_origins,
        public_url=config.public_url,
        keys=read_keys_file(config.keys_file) if config.keys_file else None,
        trust_identity_header=config.trust_identity_header,
        trusted_proxies=config.trusted_proxies,
    )
