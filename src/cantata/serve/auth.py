"""The token check: loopback serves without one; any other address needs one (or keys,
or a trusted proxy's identity header: see `identity`).

A client sends the token as ``Authorization: Bearer <token>`` (what the OpenAI and A2A
clients send as their API key), as an ``X-API-Key`` header, or as the ``cantata_token``
cookie (for a browser page). The comparison takes the same time whatever the token.
"""

from __future__ import annotations

import ipaddress
from urllib.parse import unquote_to_bytes

from starlette.types import ASGIApp, Receive, Scope, Send

from ..core import ConfigurationError, owned_by
from .errors import RequestError
from .identity import (
    ANONYMOUS,
    IDENTITY_SCOPE_KEY,
    HeaderTrust,
    Identity,
    ServeKeys,
    check_identity_name,
)
from .limits import send_error

__all__ = [
    "TOKEN_COOKIE",
    "TOKEN_ENV",
    "IdentityMiddleware",
    "TokenAuthMiddleware",
    "check_bind",
    "is_loopback",
]

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


def check_bind(host: str, token: str | None, *, identities: bool = False) -> None:
    """Refuse to serve beyond this machine without a token (`identities`: keys or a trusted
    identity header are configured, which need no token)."""
    if token is not None and not token:
        raise ConfigurationError("the serve token is empty; give a non-empty --token")
    if token is None and not identities and not is_loopback(host):
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


class IdentityMiddleware:
    """Finds each request's `Identity` (see `identity`), puts it on the scope
    (`identity_of` reads it) and runs the request as its owner (`cantata.core.owned_by`).

    With `keys`, a request must carry one of them, else 401 (OpenAI's error shape), except
    for the dev UI page and its assets (`PUBLIC_PAGE_PATHS`), so a browser can load the
    page that asks for it. With `trust`, a request from a trusted proxy that carries the
    identity header is that identity, with no key; the header from any other address is a
    403; a bad name in it a 400. With neither, every request is `ANONYMOUS`."""

    def __init__(
        self, app: ASGIApp, keys: ServeKeys | None = None, *, trust: HeaderTrust | None = None
    ) -> None:
        self.app = app
        self._keys = keys if keys else None
        self._trust = trust
        self._open = self._keys is None and trust is None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        found = self._identity(scope)
        if isinstance(found, RequestError):
            if _public(scope):
                found = ANONYMOUS
            elif scope["type"] == "websocket":
                await send({"type": "websocket.close", "code": 4400 + found.status % 100})
                return
            else:
                await send_error(send, found)
                return
        scope[IDENTITY_SCOPE_KEY] = found
        with owned_by(found.owner):
            await self.app(scope, receive, send)

    def _identity(self, scope: Scope) -> Identity | RequestError:
        headers = scope.get("headers", ())
        if self._trust is not None:
            values = self._trust.values(headers)
            if values:
                return self._from_header(scope, values)
        if self._open:
            return ANONYMOUS
        if self._keys is not None:
            found = self._keys.find(_offered(scope))
            if found is not None:
                return found
        return RequestError(
            "this server needs a token: send 'Authorization: Bearer <token>' (the OpenAI "
            "client's api_key), an X-API-Key header or the cantata_token cookie",
            status=401,
            code="invalid_api_key",
        )

    def _from_header(self, scope: Scope, values: list[bytes]) -> Identity | RequestError:
        assert self._trust is not None
        header = self._trust.header
        if not self._trust.trusts(scope.get("client")):
            return RequestError(
                f"the {header} header names an identity and is taken only from this server's "
                "trusted proxies; send a key instead",
                status=403,
                code="identity_header_untrusted",
            )
        if len(values) != 1:
            return RequestError(f"the {header} header is given {len(values)} times", status=400)
        try:
            name = check_identity_name(values[0].decode("utf-8").strip(), where=header)
        except (UnicodeDecodeError, ConfigurationError) as exc:
            return RequestError(f"the {header} header does not name an identity: {exc}", status=400)
        return Identity(name)


class TokenAuthMiddleware(IdentityMiddleware):
    """`IdentityMiddleware` with one token, the anonymous identity's."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        if not token:
            raise ConfigurationError("the serve token is empty; give a non-empty token")
        super().__init__(app, ServeKeys.of(token=token))


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
