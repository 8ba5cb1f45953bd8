"""Who a request is from: the identity every stored object belongs to.

An `Identity` is a name. The auth middleware (`auth`) finds it for each request, puts it
on the request's scope and sets it as the owner of the work the request does
(`cantata.core.owned_by`); a route reads it with `identity_of`, the one accessor. Three
ways to find it:

- **Keys** (`ServeKeys`): each client has its own key, sent as the token always was
  (``Authorization: Bearer``, ``X-API-Key`` or the dev UI's cookie); the key names the
  identity. A keys file (`read_keys_file`, ``--keys-file``) holds one ``identity:key`` per
  line; the single ``--token`` is one more key, of the anonymous identity.
- **A trusted proxy's header** (`HeaderTrust`, ``--trust-identity-header NAME`` with
  ``--trusted-proxy ADDRESS``): a request from one of the proxy addresses names its
  identity in that header; the same header from any other address is refused (403), so
  no client names itself.
- **Nothing configured** (loopback without a token): every request is the one anonymous
  identity, as a server without identities always was.

Ownership is a namespace, not a field: the server's store view (`owned_store`) prefixes
every key and log of a named identity with ``@<name>/``, so an object another identity
made is simply not there (404, never 403: nothing says it exists), a client-chosen id
(a conversation, an A2A context, a dev UI chat) names a different object for each
identity, lists show only one's own, and it costs no schema and no migration on any
store (memory, SQLite, PostgreSQL, Redis): the anonymous identity's keys are unprefixed,
the keys a server without identities always wrote. Memories are namespaced the same way
(`cantata.agents.Memory` reads the owner).
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core import ConfigurationError

__all__ = [
    "ANONYMOUS",
    "IDENTITY_SCOPE_KEY",
    "HeaderTrust",
    "Identity",
    "KeysFileError",
    "ServeKeys",
    "check_identity_name",
    "identity_of",
    "parse_keys",
    "read_keys_file",
]

IDENTITY_SCOPE_KEY = "cantata.identity"
"""Where the auth middleware puts a request's `Identity` in its ASGI scope."""

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@+-]{0,127}")
_ANONYMOUS_NAME = "anonymous"
_MIN_KEY = 16
_MAX_KEY = 4096
_MAX_KEYS_FILE = 1 << 20


@dataclass(frozen=True, slots=True)
class Identity:
    """A client of the server, by name; what it stores is its own."""

    name: str

    @property
    def anonymous(self) -> bool:
        """The identity of a server without identities (and of its single ``--token``)."""
        return self.name == _ANONYMOUS_NAME

    @property
    def owner(self) -> str | None:
        """The owner its work runs as (`cantata.core.owned_by`): None when anonymous."""
        return None if self.anonymous else self.name


ANONYMOUS = Identity(_ANONYMOUS_NAME)
"""Every request's identity on a server without keys or a trusted header, and the
identity of the single ``--token``."""


def identity_of(request: Any) -> Identity:
    """The identity of a request (a Starlette `Request` or an ASGI scope), as the auth
    middleware found it; `ANONYMOUS` for a scope that never passed it (an app built
    without identities)."""
    scope = request if isinstance(request, Mapping) else request.scope
    found = scope.get(IDENTITY_SCOPE_KEY)
    return found if isinstance(found, Identity) else ANONYMOUS


def check_identity_name(name: object, *, where: str = "identity") -> str:
    """`name` if it can name an identity (1-128 letters, digits, ``_ . @ + -``, starting
    with a letter or digit; not ``anonymous``), else `ConfigurationError`."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        shown = repr(name)[:80]
        raise ConfigurationError(
            f"{where} {shown} is not an identity name: use 1 to 128 letters, digits, '_', "
            "'.', '@', '+' or '-', starting with a letter or digit"
        )
    if name == _ANONYMOUS_NAME:
        raise ConfigurationError(
            f"{where} {name!r} is reserved for the server's anonymous identity; choose another"
        )
    return name


class KeysFileError(ConfigurationError):
    """A keys file that cannot be read as ``identity:key`` lines; says which line and why
    (never the key)."""


class ServeKeys:
    """The keys a server accepts, each naming an identity. Looked up by the SHA-256 of the
    offered key, compared with `hmac.compare_digest` against every stored digest, so the
    time taken says nothing about any key."""

    def __init__(self, keys: Mapping[str, Identity]) -> None:
        for key in keys:
            if not key:
                raise ConfigurationError("a serve key is empty; give non-empty keys")
        self._digests = [(_digest(k.encode()), who) for k, who in keys.items()]

    @classmethod
    def of(cls, *, token: str | None = None, keys: Mapping[str, str] | None = None) -> ServeKeys:
        """The single `token` (the anonymous identity's) and `keys` (key -> identity name)."""
        table = {key: Identity(check_identity_name(n)) for key, n in (keys or {}).items()}
        if token is not None:
            if not token:
                raise ConfigurationError("the serve token is empty; give a non-empty --token")
            if token in table:
                raise ConfigurationError(
                    f"--token is also the key of identity {table[token].name!r} in the keys "
                    "file; give each identity its own key"
                )
            table[token] = ANONYMOUS
        return cls(table)

    def __bool__(self) -> bool:
        return bool(self._digests)

    def __len__(self) -> int:
        return len(self._digests)

    @property
    def identities(self) -> frozenset[Identity]:
        """Every identity a key names."""
        return frozenset(who for _, who in self._digests)

    def find(self, offered: Iterable[bytes]) -> Identity | None:
        """The identity of the first offered key that is one of these, or None."""
        for given in offered:
            digest = _digest(given)
            found: Identity | None = None
            for stored, who in self._digests:  # no early exit: every digest is compared
                if hmac.compare_digest(digest, stored):
                    found = who
            if found is not None:
                return found
        return None


def _digest(key: bytes) -> bytes:
    return hashlib.sha256(key).digest()


def parse_keys(text: str, *, source: str = "keys file") -> dict[str, str]:
    """A keys file's ``identity:key`` lines as key -> identity name.

    One key per line: the identity's name, a colon, the key (at least 16 characters; any
    but a newline; spaces around it are dropped). Blank lines and lines starting with
    ``#`` are skipped. An identity may have several keys (to rotate one); a key may name
    only one identity. Anything else is a `KeysFileError` naming the line."""
    if not isinstance(text, str):
        raise KeysFileError(f"the {source} must be text, not {type(text).__name__}")
    out: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        where = f"{source}, line {number}"
        name, colon, key = line.partition(":")
        name, key = name.strip(), key.strip()
        if not colon:
            raise KeysFileError(f"{where}: write 'identity:key' (no colon on this line)")
        try:
            check_identity_name(name, where=f"{where}: identity")
        except ConfigurationError as exc:
            raise KeysFileError(str(exc)) from None
        if len(key) < _MIN_KEY:
            raise KeysFileError(
                f"{where}: the key of {name!r} has {len(key)} characters; give at least "
                f"{_MIN_KEY} (such as: python -c 'import secrets; print(secrets.token_urlsafe())')"
            )
        if len(key) > _MAX_KEY:
            raise KeysFileError(f"{where}: the key of {name!r} is longer than {_MAX_KEY}")
        if not key.isprintable():
            raise KeysFileError(f"{where}: the key of {name!r} holds a control character")
        if key in out and out[key] != name:
            raise KeysFileError(
                f"{where}: this key is already the key of {out[key]!r}; a key names one identity"
            )
        out[key] = name
    if not out:
        raise KeysFileError(f"the {source} holds no keys: write one 'identity:key' per line")
    return out


def read_keys_file(path: str | Path) -> dict[str, str]:
    """`parse_keys` of the file at `path` (UTF-8, at most 1 MiB)."""
    file = Path(path)
    try:
        data = file.read_bytes()[: _MAX_KEYS_FILE + 1]
    except OSError as exc:
        raise KeysFileError(f"cannot read the keys file {str(file)!r}: {exc.strerror}") from None
    if len(data) > _MAX_KEYS_FILE:
        raise KeysFileError(f"the keys file {str(file)!r} is larger than 1 MiB")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise KeysFileError(f"the keys file {str(file)!r} is not UTF-8 text") from None
    return parse_keys(text, source=f"keys file {str(file)!r}")


class HeaderTrust:
    """An identity header set by a proxy: believed from `proxies` (addresses or networks:
    ``127.0.0.1``, ``10.0.0.0/8``), refused from anywhere else."""

    def __init__(self, header: str, proxies: Sequence[str]) -> None:
        if not isinstance(header, str) or not re.fullmatch(r"[A-Za-z0-9-]{1,64}", header):
            raise ConfigurationError(
                f"--trust-identity-header {header!r} is not a header name (letters, digits "
                "and '-', such as X-Forwarded-User)"
            )
        if header.lower() in ("authorization", "cookie", "host", "x-api-key", "content-type"):
            raise ConfigurationError(
                f"--trust-identity-header {header!r} is a header with another meaning; name "
                "the header your proxy sets the user in (such as X-Forwarded-User)"
            )
        if not proxies:
            raise ConfigurationError(
                "--trust-identity-header needs --trusted-proxy: the addresses of the proxies "
                "that set it (any other client could set it too)"
            )
        self.header = header
        self._name = header.lower().encode("ascii")
        self._networks = tuple(_network(p) for p in proxies)

    def trusts(self, client: Any) -> bool:
        """Whether a request from `client` (the ASGI scope's ``client``) comes from a proxy."""
        if not client:
            return False
        try:
            address = ipaddress.ip_address(str(client[0]))
        except ValueError:
            return False
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        return any(address in net for net in self._networks)

    def values(self, headers: Iterable[tuple[bytes, bytes]]) -> list[bytes]:
        """The values of the header among `headers`."""
        return [value for name, value in headers if name == self._name]


def _network(spec: str) -> ipaddress.IPv4Network | ipaddress.IPv6Network:
    try:
        return ipaddress.ip_network(spec.strip(), strict=False)
    except (ValueError, AttributeError):
        raise ConfigurationError(
            f"--trusted-proxy {spec!r} is not an address or network (such as 127.0.0.1 or "
            "10.0.0.0/8)"
        ) from None
