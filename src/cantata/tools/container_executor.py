"""`ContainerCodeExecutor`: model-written Python in a container, for code you do not trust.

`LocalCodeExecutor` confines a child process with Linux namespaces and seccomp itself; this
executor does the same through a container engine, for hosts where that is the tool at hand
(or where user namespaces are off). It runs each snippet in a fresh container of a local
engine (Docker, through its ``docker`` client library) that sees only what it is given:

- no network (``--network none``: no interface but loopback inside the container),
- a read-only root made of an empty image, the host's Python installation and the system
  libraries it links against mounted read-only, the scratch directory the only writable
  place besides a small ``/tmp`` in memory,
- an unprivileged user, no capabilities, no new privileges, a bound on processes and
  memory, and a kill at the time limit.

No image is pulled: the empty image is made locally (``docker import`` of an empty tar) the
first time, so it works where no registry can be reached. The engine must run on this
machine (the interpreter is bind-mounted from the host: its standard library, not a
virtualenv's packages). Install the client with
``pip install 'cantata[container]'``.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
import sys
import tarfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from ..core import ConfigurationError, new_id
from .code_executor import CodeExecutionError, CodeResult, _ScratchExecutor

if TYPE_CHECKING:
    import docker

__all__ = ["EMPTY_IMAGE", "ContainerCodeExecutor"]

EMPTY_IMAGE = "cantata-empty:1"
"""The image the code runs in: nothing at all; made locally when missing."""

_SCRATCH = "/work"
_NOBODY = "65534:65534"
_LIBRARIES = ("/lib", "/lib64", "/usr/lib", "/usr/lib64")
"""System library directories mounted read-only (those that exist): the interpreter's own
shared libraries (libc, libm, libssl, ...) live there."""


class ContainerCodeExecutor(_ScratchExecutor):
    """Runs Python source in a locked-down container, one container per run, with the same
    interface as `LocalCodeExecutor` (``run(code, time_limit=)`` -> `CodeResult`).

    ``ContainerCodeExecutor(timeout=10)`` makes a private scratch directory (removed by
    `close()` or ``async with``); ``work_dir=`` uses yours. Files written by one run are
    there for the next. `python` is a host interpreter (default: this one), mounted
    read-only with its installation. `CodeExecutionError` when the engine cannot be
    reached or the container cannot start."""

    isolated: ClassVar[bool] = True

    def __init__(
        self,
        *,
        timeout: float = 10.0,
        work_dir: str | os.PathLike[str] | None = None,
        max_output: int = 20_000,
        python: str | None = None,
        memory: str = "256m",
        pids_limit: int = 64,
        client: docker.DockerClient | None = None,
    ) -> None:
        super().__init__(
            "ContainerCodeExecutor",
            timeout=timeout,
            max_output=max_output,
            work_dir=work_dir,
            prefix="cantata-container-",
        )
        self.memory = memory
        self.pids_limit = pids_limit
        self.python = os.path.realpath(python or sys.executable)
        self._prefix = _installation(self.python)
        self._client = client
        # Root on the host runs the code as nobody, who must be able to write the scratch
        # directory; anyone else runs it as themselves.
        if os.getuid() == 0:
            self.user = _NOBODY
            if self._owned is not None:
                os.chown(self._dir, 65534, 65534)
        else:
            self.user = f"{os.getuid()}:{os.getgid()}"

    @property
    def work_dir(self) -> Path:
        """The scratch directory, mounted at ``/work`` in the container."""
        return self._dir

    def close(self) -> None:
        """Remove the private scratch directory and let go of the engine's client."""
        super().close()
        if self._client is not None:
            self._client.close()
            self._client = None

    async def run(self, code: str, *, time_limit: float | None = None) -> CodeResult:
        """Run `code` in a new container and wait for it, at most `time_limit` seconds
        (default: the executor's timeout), then remove the container."""
        if not isinstance(code, str):
            raise ConfigurationError(f"code to run must be a str, got {type(code).__name__}")
        if self._closed:
            raise CodeExecutionError("this ContainerCodeExecutor was closed; make a new one")
        limit = self.timeout if time_limit is None else time_limit
        name = f"snippet_{new_id()[:12]}.py"
        script = self._dir / name
        script.write_text(code, encoding="utf-8")
        try:
            container = await asyncio.to_thread(self._start, name)
            try:
                return await self._collect(container, limit)
            finally:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(
                        asyncio.to_thread(container.remove, force=True), _ENGINE_BOUND
                    )
        finally:
            script.unlink(missing_ok=True)

    def _engine(self) -> docker.DockerClient:
        if self._client is None:
            try:
                import docker
            except ImportError as exc:
                raise CodeExecutionError(
                    "ContainerCodeExecutor needs the docker client library: "
                    "pip install 'cantata[container]'"
                ) from exc
            try:
                self._client = docker.from_env(timeout=int(_ENGINE_BOUND))
                self._client.ping()
            except docker.errors.DockerException as exc:
                self._client = None
                raise CodeExecutionError(
                    f"no container engine answers (is dockerd running? DOCKER_HOST?): {exc}"
                ) from exc
        return self._client

    def _start(self, script: str) -> Any:
        import docker

        client = self._engine()
        _ensure_image(client)
        # /lib may be a link to /usr/lib (merged /usr): each path is mounted from where it
        # leads, so the interpreter's loader finds its libraries under either name.
        mounts = [
            docker.types.Mount(target, os.path.realpath(target), type="bind", read_only=True)
            for target in (self._prefix, *_LIBRARIES)
            if Path(target).is_dir()
        ]
        mounts.append(docker.types.Mount(_SCRATCH, str(self._dir), type="bind"))
        try:
            container = client.containers.create(
                EMPTY_IMAGE,
                command=[self.python, "-I", f"{_SCRATCH}/{script}"],
                working_dir=_SCRATCH,
                user=self.user,
                environment={
                    "HOME": _SCRATCH,
                    "TMPDIR": "/tmp",
                    "LANG": "C.UTF-8",
                    "PYTHONIOENCODING": "utf-8",
                    "PATH": "/usr/bin:/bin",
                },
                network_mode="none",
                read_only=True,
                tmpfs={"/tmp": "rw,size=16m,mode=1777"},
                mounts=mounts,
                mem_limit=self.memory,
                memswap_limit=self.memory,
                pids_limit=self.pids_limit,
                cap_drop=["ALL"],
                security_opt=["no-new-privileges"],
                stdin_open=False,
                detach=True,
            )
            container.start()
        except docker.errors.DockerException as exc:
            raise CodeExecutionError(f"the container engine could not run the code: {exc}") from exc
        return container

    async def _collect(self, container: Any, limit: float) -> CodeResult:
        waiting = asyncio.ensure_future(asyncio.to_thread(container.wait))
        timed_out = False
        try:
            status = await asyncio.wait_for(asyncio.shield(waiting), limit)
        except TimeoutError:
            timed_out = True
            with contextlib.suppress(Exception):
                await asyncio.to_thread(container.kill)
            status = await asyncio.wait_for(waiting, _ENGINE_BOUND)
        except BaseException:
            with contextlib.suppress(Exception):
                await asyncio.to_thread(container.kill)
            raise
        out, out_cut = await asyncio.to_thread(_logs, container, self.max_output, stdout=True)
        err, err_cut = await asyncio.to_thread(_logs, container, self.max_output, stdout=False)
        code = status.get("StatusCode", -9) if isinstance(status, dict) else -9
        return CodeResult(
            exit_code=-9 if timed_out else int(code),
            stdout=out,
            stderr=err,
            timed_out=timed_out,
            truncated=out_cut or err_cut,
        )


_ENGINE_BOUND = 30.0
"""Seconds any one call to the engine may take (a busy engine, not a measured time)."""


def _installation(python: str) -> str:
    """The directory tree holding the interpreter and its standard library, mounted
    read-only at the same path (a virtualenv's interpreter resolves to its base's)."""
    if not os.path.isfile(python) or not os.access(python, os.X_OK):
        raise ConfigurationError(f"ContainerCodeExecutor python {python!r} is not an interpreter")
    prefix = os.path.realpath(sys.base_prefix)
    if python.startswith(prefix + os.sep) and prefix not in ("/", "/usr"):
        return prefix
    return os.path.dirname(os.path.dirname(python))


def _ensure_image(client: docker.DockerClient) -> None:
    """Make the empty image once (an empty tar imported): nothing to pull."""
    import docker

    try:
        client.images.get(EMPTY_IMAGE)
        return
    except docker.errors.ImageNotFound:
        pass
    empty = io.BytesIO()
    with tarfile.open(fileobj=empty, mode="w"):
        pass
    repository, tag = EMPTY_IMAGE.split(":")
    client.api.import_image_from_data(empty.getvalue(), repository=repository, tag=tag)


def _logs(container: Any, limit: int, *, stdout: bool) -> tuple[str, bool]:
    """One stream of the container's output, at most `limit` characters kept."""
    chunks: list[bytes] = []
    size = 0
    cut = False
    for chunk in container.logs(stdout=stdout, stderr=not stdout, stream=True):
        room = limit * 4 - size
        if room <= 0:
            cut = True
            break
        chunks.append(chunk[:room])
        size += min(len(chunk), room)
    text = b"".join(chunks).decode("utf-8", errors="replace")
    if len(text) > limit:
        text, cut = text[:limit], True
    return text, cut
