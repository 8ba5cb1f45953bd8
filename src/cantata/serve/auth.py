"""The token check: loopback serves without one; any other address needs one.

A client sends the token as ``Authorization: Bearer <token>`` (what the OpenAI and A2A
clients send as their API key), as an ``X-API-Key`` header, or as the ``cantata_token``
cookie (for a browser page). The comparison takes the same time whatever the token.
"""

from __future__ import annotations

import hmac
import ipaddress
from urllib.parse import unquote_to_bytes

from starlette.types import ASGIApp, Receive, Scope, Send

from ..core import ConfigurationError
from .errors import RequestError
from .limits import send_error

__all__ = ["TOKEN_COOKIE", "TOKEN_ENV", "TokenAuthMiddleware", "check_bind", "is_loopback"]

TOKEN_ENV = "CANTATA_SERVE_TOKEN"
TOKEN_COOKIE = "cantata_token"


def is_loopback(host: str) -> bool:
    """True for addresses only this machine can reach (127.0.0.0/8, ::1, localhost)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_bind(host: str, token: str | None) -> None:
    """Refuse to serve beyond this machine without a token."""
    if token is not None and not token:
        raise ConfigurationError("the serve token is empty; give a non-empty --token")
    if token is None and not is_loopback(host):
        raise ConfigurationError(
            f"refusing to serve on {host!r} without a token: anyone who can reach that "
            f"address could run the served agents; pass --token or set {TOKEN_ENV} "
            "(clients then send it as 'Authorization: Bearer <token>'), or bind 127.0.0.1"
        )


PUBLIC_PAGE_PATHS = ("/", "/devui/static/")
"""What a browser may fetch without the token: the dev UI page and its static assets. They
hold no data and run nothing; the page asks for the token and keeps it in the
`cantata_token` cookie, which every API call then carries. ("/" matches only itself.)"""


def _public(scope: Scope) -> bool:
    if scope["type"] != "http" or scope.get("method") not in ("GET", "HEAD"):
        return False
    path = scope.get("path", "")
    return path == "/" or any(path.startswith(p) for p in PUBLIC_PAGE_PATHS[1:])


class TokenAuthMiddleware:
    """Answers 401 (OpenAI's error shape) to any request without the token, except for the
    dev UI page and its assets (`PUBLIC_PAGE_PATHS`), so a browser can load the page that
    asks for it."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        if not token:
            raise ConfigurationError("the serve token is empty; give a non-empty token")
        self.app = app
        self._token = token.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or _public(scope) or self._allowed(scope):
            await self.app(scope, receive, send)
            return
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 4401})
            return
        await send_error(
            send,
            RequestError(
                "this server needs a token: send 'Authorization: Bearer <token>' (the OpenAI "
                "client's api_key), an X-API-Key header or the cantata_token cookie",
                status=401,
                code="invalid_api_key",
            ),
        )

    def _allowed(self, scope: Scope) -> bool:
        return any(hmac.compare_digest(given, self._token) for given in _offered(scope))


def _offered(scope: Scope) -> list[bytes]:
    out: list[bytes] = []
    for name, value in scope.get("headers", ()):
        if name == b"authorization":
            scheme, _, rest = value.partition(b" ")
            if scheme.lower() == b"bearer":
                out.append(rest.strip())
        elif name == b"x-api-key":
            out.append(value.strip())
        elif name == b"cookie":
            out.extend(_cookie_tokens(value))
    return out


_COOKIE_NAME = TOKEN_COOKIE.encode()


def _cookie_tokens(header: bytes) -> list[bytes]:
    """The values of every `TOKEN_COOKIE` in a ``Cookie`` header, percent-decoded (the dev
    UI's login sets the token percent-encoded, so any token's characters survive). Each
    ``name=value`` pair stands alone: a malformed one elsewhere in the header is skipped,
    never the reason the token is not seen."""
    out = []
    for pair in header.split(b";"):
        name, eq, value = pair.partition(b"=")
        if eq and name.strip() == _COOKIE_NAME:
            value = value.strip()
            if len(value) >= 2 and value[:1] == value[-1:] == b'"':
                value = value[1:-1]
            out.append(unquote_to_bytes(value))
    return out
