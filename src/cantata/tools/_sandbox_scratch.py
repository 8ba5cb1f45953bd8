"""Private scratch directories that do not outlive their process: removed on `close`, at
interpreter exit, on a SIGTERM nobody else handles, and, for a process that was killed
outright, by the next process that makes one (the owner's pid is in the name).

A server stopped by SIGTERM (uvicorn re-raises it with the default action once it has
drained, which ends the process before ``atexit`` runs) would otherwise leave its coders'
directories in the temporary directory for good.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import shutil
import signal
import tempfile
import threading
from pathlib import Path
from types import FrameType

__all__ = ["make_private_scratch", "remove_private_scratch"]

_live: dict[str, int] = {}
"""Each private directory and the pid of the process that made it: a forked child inherits
this table, and must not remove its parent's directories when it ends."""
_lock = threading.Lock()
_hooked = False


def make_private_scratch(prefix: str) -> Path:
    """A new directory in the temporary directory, ``<prefix><pid>-<random>``, removed by
    `remove_private_scratch` or when this process ends (see the module docstring)."""
    _sweep_dead(prefix)
    path = tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-")
    with _lock:
        _live[path] = os.getpid()
    _hook()
    return Path(path)


def remove_private_scratch(path: Path) -> None:
    """Remove `path` (made by `make_private_scratch`) and forget it; in a forked child of
    the process that made it, leave it (it is the parent's)."""
    with _lock:
        if _live.get(str(path)) != os.getpid():
            return
        del _live[str(path)]
    shutil.rmtree(path, ignore_errors=True)


def _remove_all() -> None:
    me = os.getpid()
    with _lock:
        paths = [path for path, owner in _live.items() if owner == me]
        for path in paths:
            del _live[path]
    for path in paths:
        shutil.rmtree(path, ignore_errors=True)


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    # Python runs this in the main thread between bytecodes, not in signal context, so it
    # may remove files; then the signal's default action ends the process, as it would have.
    _remove_all()
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTERM)


def _hook() -> None:
    global _hooked
    if _hooked:
        return
    _hooked = True
    atexit.register(_remove_all)
    # Only where SIGTERM would kill the process without a word: a handler someone installed
    # (uvicorn's, a test runner's) is left alone; uvicorn restores this one before it
    # re-raises the signal, so the directories go then.
    if threading.current_thread() is threading.main_thread():
        with contextlib.suppress(ValueError, OSError):
            if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
                signal.signal(signal.SIGTERM, _on_sigterm)


def _sweep_dead(prefix: str) -> None:
    """Remove directories of this prefix whose owner process is gone (killed outright)."""
    pattern = re.compile(re.escape(prefix) + r"(\d+)-")
    root = tempfile.gettempdir()
    with contextlib.suppress(OSError):
        for entry in os.scandir(root):
            found = pattern.match(entry.name)
            if not found or not entry.is_dir(follow_symlinks=False):
                continue
            pid = int(found.group(1))
            if pid == os.getpid() or _alive(pid):
                continue
            shutil.rmtree(entry.path, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True
