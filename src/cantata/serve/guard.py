"""What keeps web pages out: a server on this machine that any page the user opens could
otherwise reach.

A browser lets any page send requests to ``127.0.0.1``; what it withholds is the answer, and
the right to send anything but a "simple" request (a GET, or a POST of form data or plain
text) without asking the server first (a CORS preflight). Two checks, before the token's and
every route's, turn that into a wall:

- **Host.** The ``Host`` header must name this server: the address the connection came in
  on, ``localhost`` or any loopback address when that address is loopback, or a name given
  with `allowed_hosts` (``--allowed-host``; ``*`` for any, behind a proxy that checks it).
  Otherwise 403. A page on ``evil.example`` whose name is made to resolve to 127.0.0.1 (DNS
  rebinding) is same-origin with itself and could read every answer; its requests say
  ``Host: evil.example``.
- **Content type.** A POST, and any request with a body, must say ``application/json`` (or
  a JSON type of its protocol, ``application/<x>+json``); otherwise 415. Those are not
  types a page may send across origins without a preflight, which this server approves only
  for the origins given with `cors_origins` (``--cors-origin``), so a page elsewhere cannot
  start a run, whether or not the server has a token. (The OpenAI, A2A and MCP clients send
  ``application/json`` on every POST.)

The dev UI's writes therefore need no CSRF token of their own: they are JSON POSTs, which
no page on another origin can send; the token cookie is ``HttpOnly`` and
``SameSite=Strict`` (`devui`), so no script reads it and no other site's request carries it;
and no CORS answer ever allows credentials, so not even an origin named with
``--cors-origin`` can spend it. Every answer says ``X-Content-Type-Options: nosniff`` and,
unless the route set its own, ``Content-Security-Policy: default-src 'none';
frame-ancestors 'none'``: nothing served here may be framed.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Sequence
from urllib.parse import urlsplit

from starlette.middleware.cors import CORSMiddleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..core import ConfigurationError
from .admission import RouteTable, send_refusal
from .errors import RequestError
from .limits import SERVER_SEND

__all__ = [
    "DEFAULT_CSP",
    "GuardMiddleware",
    "check_allowed_host",
    "check_cors_origin",
    "check_public_url",
    "guarded",
]

DEFAULT_CSP = b"default-src 'none'; frame-ancestors 'none'"
"""The policy of every answer that sets none: it loads nothing and is framed nowhere."""

_JSON = b"application/json"
_LABEL = r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?"
_HOSTNAME = re.compile(rf"{_LABEL}(?:\.{_LABEL})*\.?", re.IGNORECASE)
_NO_BODY_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_CORS_EXPOSED = ["Retry-After", "Mcp-Session-Id"]


def _normal(host: str) -> str:
    """A host name or address as the checks compare it: lower case, no brackets, no final
    dot, an IPv4 address mapped into IPv6 as itself."""
    host = host.strip().strip("[]").lower().rstrip(".")
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return str(address.ipv4_mapped)
    return str(address)


def _host_of(header: bytes) -> str | None:
    """The name in a ``Host`` header value (port dropped), or None if it is not one."""
    try:
        text = header.decode("ascii").strip()
    except UnicodeDecodeError:
        return None
    if text.startswith("["):
        name, bracket, rest = text[1:].partition("]")
        if not bracket:
            return None
    else:
        name, colon, rest = text.partition(":")
        rest = colon + rest
    if rest and not (rest[0] == ":" and rest[1:].isdigit()):
        return None
    if not name or any(c in name for c in " /\\@?#"):
        return None
    return _normal(name)


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_allowed_host(name: str) -> str:
    """`name` as an allowed host (a host name or address, no scheme or port; ``*`` for
    any), or `ConfigurationError`."""
    if not isinstance(name, str) or not name.strip():
        raise ConfigurationError(f"--allowed-host must be a non-empty name, got {name!r}")
    text = name.strip()
    if text == "*":
        return "*"
    bare = text[1:-1] if text.startswith("[") and text.endswith("]") else text
    if not _is_ip(bare) and not _HOSTNAME.fullmatch(bare):
        raise ConfigurationError(
            f"--allowed-host {name!r} is not a host name: give the name alone, such as "
            "'agents.example.com' (no scheme, port or path; every port answers the same)"
        )
    return _normal(bare)


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def check_cors_origin(origin: str, *, token: str | None) -> str:
    """`origin` as a CORS origin (``scheme://host[:port]``, or ``*`` on a server with a
    token), or `ConfigurationError`."""
    if not isinstance(origin, str) or not origin.strip():
        raise ConfigurationError(f"--cors-origin must be a non-empty origin, got {origin!r}")
    origin = origin.strip()
    if origin == "*":
        if token is None:
            raise ConfigurationError(
                "--cors-origin '*' lets every web page drive this server, and it has no "
                "token; give the origins that may (https://app.example.com), or a --token"
            )
        return origin
    parts = urlsplit(origin)
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.path not in ("", "/"):
        raise ConfigurationError(
            f"--cors-origin {origin!r} is not an origin: give scheme://host[:port], such as "
            "'https://app.example.com' (no path)"
        )
    if parts.query or parts.fragment or parts.username or parts.password:
        raise ConfigurationError(f"--cors-origin {origin!r} is not an origin (scheme://host)")
    return origin.rstrip("/")


def check_public_url(url: str) -> str:
    """`url` as the server's public URL (``http(s)://host[:port][/prefix]``), without a final
    slash, or `ConfigurationError`."""
    parts = urlsplit(url.strip()) if isinstance(url, str) else None
    if (
        parts is None
        or parts.scheme not in ("http", "https")
        or not parts.hostname
        or parts.query
        or parts.fragment
        or parts.username
        or parts.password
    ):
        raise ConfigurationError(
            f"--public-url {url!r} must be the URL clients reach this server at, "
            "http(s)://host[:port][/prefix], such as 'https://agents.example.com'"
        )
    return url.strip().rstrip("/")


class GuardMiddleware:
    """The Host and content-type checks of the module docstring, and the default headers of
    every answer. `allowed_hosts` are checked names (`check_allowed_host`)."""

    def __init__(
        self, app: ASGIApp, *, allowed_hosts: Iterable[str] = (), routes: RouteTable | None = None
    ) -> None:
        self.app = app
        self._routes = routes or RouteTable(())
        hosts = {_normal(h) for h in allowed_hosts}
        self._any_host = "*" in hosts
        self._hosts = frozenset(hosts - {"*"})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        refusal = self._refusal(scope)
        if refusal is not None:
            if kind == "websocket":
                await send(
                    {"type": "websocket.close", "code": 4403 if refusal.status == 403 else 1003}
                )
            else:
                await send_refusal(send, self._routes.work(scope), b"", refusal)
            return
        if kind == "websocket":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", ()))
                names = {k.lower() for k, _ in headers}
                headers.append((b"x-content-type-options", b"nosniff"))
                if b"content-security-policy" not in names:
                    headers.append((b"content-security-policy", DEFAULT_CSP))
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_headers)

    def _refusal(self, scope: Scope) -> RequestError | None:
        host_header = None
        content_type = None
        has_body = False
        for name, value in scope.get("headers", ()):
            if name == b"host":
                host_header = value
            elif name == b"content-type":
                content_type = value
            elif name == b"content-length":
                has_body = has_body or value.strip() not in (b"", b"0")
            elif name == b"transfer-encoding":
                has_body = True
        if not self._host_allowed(scope, host_header):
            shown = (host_header or b"").decode("latin-1")[:100]
            return RequestError(
                f"this server does not answer to Host {shown!r}: it answers to its own address"
                + (", localhost" if self._loopback(scope) else "")
                + " and the names given with --allowed-host (start it with --allowed-host "
                "<name> to be reached by that name)",
                status=403,
                code="host_not_allowed",
            )
        method = scope.get("method", "GET")
        writes = method == "POST" or (has_body and method not in _NO_BODY_METHODS)
        if scope["type"] == "http" and writes and not _is_json(content_type):
            shown = (content_type or b"").decode("latin-1")[:100]
            return RequestError(
                f"{method} {scope.get('path', '')} needs 'Content-Type: application/json'"
                + (f", not {shown!r}" if shown else " (none was sent)"),
                status=415,
                code="unsupported_media_type",
            )
        return None

    @staticmethod
    def _loopback(scope: Scope) -> bool:
        server = scope.get("server")
        return server is not None and _is_loopback(_normal(str(server[0])))

    def _host_allowed(self, scope: Scope, header: bytes | None) -> bool:
        if self._any_host:
            return True
        server = scope.get("server")
        if not server or server[1] is None:  # a Unix socket: no web page reaches it
            return True
        if header is None:
            return False
        host = _host_of(header)
        if host is None:
            return False
        bound = _normal(str(server[0]))
        if host == bound or host in self._hosts:
            return True
        return _is_loopback(bound) and _is_loopback(host)


def _is_json(content_type: bytes | None) -> bool:
    if content_type is None:
        return False
    media = content_type.split(b";", 1)[0].strip().lower()
    if media == _JSON:
        return True
    kind, _, subtype = media.partition(b"/")
    return kind == b"application" and subtype.endswith(b"+json") and len(subtype) > 5


class _KeepServerSend:
    """The outermost layer: keeps the server's own `send` in the scope (`SERVER_SEND`), for
    the limits' reset of a stalled connection, which the wrappers of `send` hide."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            scope[SERVER_SEND] = send
        await self.app(scope, receive, send)


def guarded(
    app: ASGIApp,
    *,
    allowed_hosts: Sequence[str] = (),
    cors_origins: Sequence[str] = (),
    routes: RouteTable | None = None,
) -> ASGIApp:
    """`app` behind `GuardMiddleware`, and behind starlette's `CORSMiddleware` when
    `cors_origins` names some (never with credentials: those origins send the token in a
    header, not the cookie). A refusal speaks the protocol `routes` declare."""
    wrapped: ASGIApp = GuardMiddleware(app, allowed_hosts=allowed_hosts, routes=routes)
    if cors_origins:
        wrapped = CORSMiddleware(
            wrapped,
            allow_origins=list(cors_origins),
            allow_methods=["GET", "POST", "DELETE", "OPTIONS"],
            allow_headers=["*"],
            allow_credentials=False,
            expose_headers=_CORS_EXPOSED,
            max_age=600,
        )
    return _KeepServerSend(wrapped)
