"""`cantata serve spec.yaml` or `cantata serve module:object`: serve agents, workflows and
teams over HTTP.

A spec file (``.yaml``, ``.yml``, ``.json``) is loaded as `cantata run` loads it, with the
same ``--setting`` and ``--allow`` options, and served exactly like an object named by
module:object. Registered on the `cantata` app by one line in `app.py` (which this module does
not import). Heavy imports
(Starlette, uvicorn, the served module) happen inside the command, so other commands start
fast.
"""

from __future__ import annotations

import os
from dataclasses import asdict
from typing import Annotated

import typer

from ..serve.drain import DEFAULT_GRACE
from ..serve.limits import Limits
from .console import err
from .serve_worker import CONFIG_VARIABLE, WorkerConfig, load_served
from .spec_options import AllowOption, SettingOption, parse_settings

__all__ = ["serve_command"]

_LEVELS = ("critical", "error", "warning", "info", "debug")
_DEFAULT_STORE = "sqlite:///.cantata/serve.db"  # cantata.serve.DEFAULT_STORE_URL, for --help
_LIMITS = Limits()  # the defaults of every bound below (cantata.serve.limits is light)


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
            help="Token clients must send (Authorization: Bearer); required off loopback "
            "unless --keys-file or --trust-identity-header is given. Its holders are one "
            "identity, the anonymous one.",
            show_envvar=True,
        ),
    ] = None,
    store: Annotated[
        str | None,
        typer.Option(
            "--store",
            help=f"Store URL for server-side threads; opened at start, so a store that cannot "
            f"be opened stops the server at once. Default: {_DEFAULT_STORE} (a SQLite file "
            "under the working directory).",
        ),
    ] = None,
    max_body: Annotated[
        int, typer.Option("--max-body", min=1, help="Largest request body, in bytes.")
    ] = _LIMITS.max_body_bytes,
    timeout: Annotated[
        float,
        typer.Option("--timeout", min=0.001, max=86_400.0, help="Seconds a request may take."),
    ] = _LIMITS.request_timeout,
    max_running: Annotated[
        int, typer.Option("--max-running", min=1, help="Requests running a model at once.")
    ] = _LIMITS.max_running,
    max_queued: Annotated[
        int,
        typer.Option("--max-queued", min=0, help="Requests waiting for a turn; beyond: 429."),
    ] = _LIMITS.max_queued,
    queue_timeout: Annotated[
        float,
        typer.Option("--queue-timeout", min=0.001, help="Seconds a request may wait for a turn."),
    ] = _LIMITS.queue_timeout,
    write_timeout: Annotated[
        float,
        typer.Option("--write-timeout", min=0.001, help="Seconds a stream waits for its reader."),
    ] = _LIMITS.write_timeout,
    abandon_after: Annotated[
        float,
        typer.Option(
            "--abandon-after",
            min=0.001,
            help="Seconds a run waiting for a person's answer is held in memory, unanswered, "
            "before it is released (counted in /metrics as cantata_serve_abandoned_runs).",
        ),
    ] = _LIMITS.abandon_after,
    grace: Annotated[
        float,
        typer.Option("--grace", min=0.1, max=3600.0, help="Seconds runs get to finish on stop."),
    ] = DEFAULT_GRACE,
    log_level: Annotated[
        str,
        typer.Option(
            "--log-level", help="Server log level: critical, error, warning, info (each request)."
        ),
    ] = "info",
    workers: Annotated[
        int,
        typer.Option(
            "--workers",
            min=1,
            max=64,
            help="Server processes on the port; they share the store (give a file or server "
            "store: not memory://), so any of them answers any conversation.",
        ),
    ] = 1,
    allow_remote_code_execution: Annotated[
        bool,
        typer.Option(
            "--allow-remote-code-execution",
            help="Serve agents that run model-written Python on this machine (a coder agent, "
            "a code runner, in LocalCodeExecutor's sandbox or not; ContainerCodeExecutor needs "
            "no flag): anyone who can send a prompt can have code run here, on loopback too (a "
            "proxy, a tunnel, another user). Refused without this flag.",
        ),
    ] = False,
    allowed_host: Annotated[
        list[str] | None,
        typer.Option(
            "--allowed-host",
            help="A name clients reach the server by, beyond its address and localhost "
            "(repeatable; '*' for any, behind a proxy that checks it). Other Host headers: 403.",
        ),
    ] = None,
    cors_origin: Annotated[
        list[str] | None,
        typer.Option(
            "--cors-origin",
            help="A web origin (https://app.example.com) whose pages may call the server "
            "(repeatable). None by default: no page elsewhere can.",
        ),
    ] = None,
    public_url: Annotated[
        str | None,
        typer.Option(
            "--public-url",
            help="The URL clients reach the server at (https://agents.example.com), named in "
            "its A2A agent cards; its host is allowed. Default: the address a request came in on.",
        ),
    ] = None,
    keys_file: Annotated[
        str | None,
        typer.Option(
            "--keys-file",
            help="A file of client keys, one 'identity:key' per line (keys of 16 characters "
            "or more; '#' starts a comment). Each identity sees only what it stored.",
        ),
    ] = None,
    trust_identity_header: Annotated[
        str | None,
        typer.Option(
            "--trust-identity-header",
            help="A header (X-Forwarded-User) naming the request's identity, set by a proxy "
            "in front; believed only from --trusted-proxy addresses, refused (403) from others.",
        ),
    ] = None,
    trusted_proxy: Annotated[
        list[str] | None,
        typer.Option(
            "--trusted-proxy",
            help="An address or network (127.0.0.1, 10.0.0.0/8) of a proxy whose "
            "--trust-identity-header is believed (repeatable).",
        ),
    ] = None,
    setting: SettingOption = None,
    allow: AllowOption = None,
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks of failures.")] = False,
) -> None:
    """Serve agents, workflows and teams (a spec file, or module:object): OpenAI-compatible
    API and more, on one port."""
    from ..core import CantataError, UsageError
    from .failure import report

    try:
        from ..serve import (
            DEFAULT_STORE_URL,
            HeaderTrust,
            Limits,
            ServedSet,
            check_bind,
            read_keys_file,
            serve,
        )
        from ..serve.local_code import check_local_code

        keys = read_keys_file(keys_file) if keys_file is not None else None
        proxies = list(trusted_proxy or [])
        if trust_identity_header is not None:
            HeaderTrust(trust_identity_header, proxies)  # checked before anything loads
        elif proxies:
            raise UsageError("--trusted-proxy is for --trust-identity-header: give both")
        identities = keys is not None or trust_identity_header is not None
        check_bind(host, token, identities=identities)  # before loading: a refusal is instant
        if log_level not in _LEVELS:
            raise UsageError(f"--log-level {log_level!r} is not one of {', '.join(_LEVELS)}")
        loaded = load_served(target, parse_settings(setting or []), allow or [])
        served = ServedSet(loaded)
        check_local_code(served, allow=allow_remote_code_execution)
        hosts, origins = list(allowed_host or []), list(cors_origin or [])
        _check_exposure(
            token or ("keys" if identities else None),
            allowed_hosts=hosts,
            cors_origins=origins,
            public_url=public_url,
        )
        names = ", ".join(f"{n} ({e.kind})" for n, e in served.items())
        limits = Limits(
            max_body_bytes=max_body,
            request_timeout=timeout,
            max_running=max_running,
            max_queued=max_queued,
            queue_timeout=queue_timeout,
            write_timeout=write_timeout,
            abandon_after=abandon_after,
        )
        store = store or DEFAULT_STORE_URL
        if workers > 1 and store.startswith("memory:"):
            raise UsageError(
                "--workers needs a store the processes share: a SQLite file or a PostgreSQL "
                "or Redis URL, not memory://"
            )
        _check_store(store)
        err().print(f"serving {names} on http://{host}:{port}/v1", highlight=False)
        if workers > 1:
            _serve_workers(
                WorkerConfig(
                    target,
                    store,
                    token,
                    parse_settings(setting or []),
                    allow or [],
                    os.getcwd(),
                    limits=asdict(limits),
                    log_level=log_level,
                    parent=os.getpid(),
                    allowed_hosts=hosts,
                    cors_origins=origins,
                    public_url=public_url,
                    keys_file=os.path.abspath(keys_file) if keys_file is not None else None,
                    trust_identity_header=trust_identity_header,
                    trusted_proxies=proxies,
                ),
                host=host,
                port=port,
                workers=workers,
                grace=grace,
            )
            return
        serve(
            served,
            host=host,
            port=port,
            token=token,
            store=store,
            limits=limits,
            log_level=log_level,
            grace=grace,
            allow_remote_code_execution=allow_remote_code_execution,
            allowed_hosts=hosts,
            cors_origins=origins,
            public_url=public_url,
            keys=keys,
            trust_identity_header=trust_identity_header,
            trusted_proxies=proxies,
        )
    except (CantataError, OSError, ImportError) as exc:
        # no model flags (a spec names its model); a tool the spec may not import is --allow
        report(exc, debug=debug, console=err(), flags={"--allow", "--setting"})
        raise typer.Exit(1) from None


def _check_exposure(
    token: str | None, *, allowed_hosts: list[str], cors_origins: list[str], public_url: str | None
) -> None:
    """The --allowed-host, --cors-origin and --public-url values, checked before the server
    starts (each worker checks them again as it builds its app)."""
    from ..serve.guard import check_allowed_host, check_cors_origin, check_public_url

    for name in allowed_hosts:
        check_allowed_host(name)
    for origin in cors_origins:
        check_cors_origin(origin, token=token)
    if public_url is not None:
        check_public_url(public_url)


def _serve_workers(
    config: WorkerConfig, *, host: str, port: int, workers: int, grace: float
) -> None:
    """`workers` processes on one socket, each building the app from `config` and draining
    it on its own when told to stop (see `cantata.serve.serve_workers`)."""
    from ..serve.server import serve_workers

    os.environ[CONFIG_VARIABLE] = config.to_env()
    serve_workers(
        "cantata.cli.serve_worker:create_app",
        workers=workers,
        host=host,
        port=port,
        log_level=config.log_level,
        grace=grace,
    )


def _check_store(url: str) -> None:
    """Open the store once and close it, so a URL that cannot be opened (no such directory,
    a database server that is down, a missing extra) stops the command here with the
    store's own words, instead of a server that starts and then fails every request."""
    import asyncio

    from ..core import CantataError, UsageError
    from ..stores import open_store

    if url.startswith("sqlite:///.cantata/"):
        os.makedirs(".cantata", exist_ok=True)  # the default's directory is ours to make

    async def open_and_close() -> None:
        store = open_store(url)
        try:
            await store.get("cantata:serve:start")  # connects, and makes the schema if new
        finally:
            await store.close()

    try:
        asyncio.run(open_and_close())
    except CantataError as exc:
        # the store's words name the place without the URL's password
        raise UsageError(f"--store cannot be opened: {exc}") from exc
