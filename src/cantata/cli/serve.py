"""`cantata serve spec.yaml` or `cantata serve module:object`: serve agents, workflows and
teams over HTTP.

A spec file (``.yaml``, ``.yml``, ``.json``) is loaded as `cantata run` loads it, with the
same ``--setting`` and ``--allow`` options, and served exactly like an object named by
module:object. Registered on the `cantata` app by one line in `app.py`. Heavy imports
(Starlette, uvicorn, the served module) happen inside the command, so other commands start
fast.
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from .run import AllowOption, SettingOption, parse_settings

__all__ = ["serve_command"]

_LEVELS = ("critical", "error", "warning", "info", "debug")


def serve_command(
    target: Annotated[
        str,
        typer.Argument(
            help="What to serve: a spec file (.yaml, .yml, .json: an agent, team or workflow "
            "spec, loaded as `cantata run` loads it), or module:object or path/file.py:object "
            "(an agent, workflow or team, or a dict or list of them)."
        ),
    ],
    host: Annotated[str, typer.Option("--host", help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", "-p", min=0, max=65535, help="Port.")] = 8000,
    token: Annotated[
        str | None,
        typer.Option(
            "--token",
            envvar="CANTATA_SERVE_TOKEN",
            help="Token clients must send (Authorization: Bearer); required off loopback.",
            show_envvar=True,
        ),
    ] = None,
    store: Annotated[
        str | None,
        typer.Option("--store", help="Store URL for server-side threads (default: SQLite file)."),
    ] = None,
    max_body: Annotated[
        int, typer.Option("--max-body", min=1, help="Largest request body, in bytes.")
    ] = 4 * 1024 * 1024,
    timeout: Annotated[
        float,
        typer.Option("--timeout", min=0.001, max=86_400.0, help="Seconds a request may take."),
    ] = 300.0,
    max_running: Annotated[
        int, typer.Option("--max-running", min=1, help="Requests running a model at once.")
    ] = 4,
    max_queued: Annotated[
        int,
        typer.Option("--max-queued", min=0, help="Requests waiting for a turn; beyond: 429."),
    ] = 4,
    queue_timeout: Annotated[
        float,
        typer.Option("--queue-timeout", min=0.001, help="Seconds a request may wait for a turn."),
    ] = 60.0,
    write_timeout: Annotated[
        float,
        typer.Option("--write-timeout", min=0.001, help="Seconds a stream waits for its reader."),
    ] = 30.0,
    grace: Annotated[
        float,
        typer.Option("--grace", min=0.1, max=3600.0, help="Seconds runs get to finish on stop."),
    ] = 10.0,
    log_level: Annotated[
        str,
        typer.Option(
            "--log-level", help="Server log level: critical, error, warning, info (each request)."
        ),
    ] = "info",
    setting: SettingOption = None,
    allow: AllowOption = None,
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks of failures.")] = False,
) -> None:
    """Serve agents, workflows and teams (a spec file, or module:object): OpenAI-compatible
    API and more, on one port."""
    from ..core import CantataError, UsageError
    from .app import _err
    from .failure import report

    try:
        from ..declarative import SPEC_SUFFIXES, load
        from ..serve import DEFAULT_STORE_URL, Limits, ServedSet, check_bind, load_target, serve

        check_bind(host, token)  # before loading anything: a refusal is instant
        if log_level not in _LEVELS:
            raise UsageError(f"--log-level {log_level!r} is not one of {', '.join(_LEVELS)}")
        if "" not in sys.path:
            sys.path.insert(0, "")  # module:object names modules of the working directory
        if target.endswith(SPEC_SUFFIXES):
            loaded = load(target, settings=parse_settings(setting or []), allow=allow or [])
        elif setting or allow:
            raise UsageError("--setting and --allow are for spec files (.yaml, .yml, .json)")
        else:
            loaded = load_target(target)
        served = ServedSet(loaded)
        names = ", ".join(f"{n} ({e.kind})" for n, e in served.items())
        limits = Limits(
            max_body_bytes=max_body,
            request_timeout=timeout,
            max_running=max_running,
            max_queued=max_queued,
            queue_timeout=queue_timeout,
            write_timeout=write_timeout,
        )
        _err().print(f"serving {names} on http://{host}:{port}/v1", highlight=False)
        serve(
            served,
            host=host,
            port=port,
            token=token,
            store=store or DEFAULT_STORE_URL,
            limits=limits,
            log_level=log_level,
            grace=grace,
        )
    except (CantataError, OSError, ImportError) as exc:
        report(exc, debug=debug, console=_err())
        raise typer.Exit(1) from None
