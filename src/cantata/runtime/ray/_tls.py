"""TLS for the direct streams, from Ray's own TLS settings.

Ray encrypts its gRPC channels when ``RAY_USE_TLS`` is ``1`` or ``true`` (any case; Ray's
rule), with the files ``RAY_TLS_SERVER_CERT``, ``RAY_TLS_SERVER_KEY`` and
``RAY_TLS_CA_CERT`` set on every node. The direct streams carry the same messages, so they
follow the same switch and use the same files, as Ray's gRPC does: mutual TLS, each side
presenting the node's certificate, each requiring the other's to be signed by the CA.

Names are checked as gRPC checks them for Ray (Ray sets no target-name override): the
server's certificate must name the address the client dialed, a node IP, in a subject
alternative name (an IP entry, or a DNS entry spelling the IP, as Ray's own test
certificates do), a DNS name by exact or one-label wildcard match; the common name counts
only when there are no alternative names and the address is not an IP. Python's own
hostname check would refuse an IP written as a DNS entry, which gRPC accepts, so the chain
is verified by `ssl` and the name here, after the handshake. A server does not check its
client's name (Ray's gRPC servers do not either): a certificate from the CA suffices.
"""

from __future__ import annotations

import ipaddress
import os
import ssl
from collections.abc import Mapping
from typing import Any

from ...core import ConfigurationError

__all__: list[str] = []

_FILES = ("RAY_TLS_SERVER_CERT", "RAY_TLS_SERVER_KEY", "RAY_TLS_CA_CERT")


def ray_tls_on(environ: Mapping[str, str] | None = None) -> bool:
    """Whether Ray's TLS is on: ``RAY_USE_TLS`` is ``1`` or ``true`` (Ray's own test)."""
    env = os.environ if environ is None else environ
    return env.get("RAY_USE_TLS", "0").lower() in ("1", "true")


def _ray_files(environ: Mapping[str, str] | None) -> tuple[str, str, str] | None:
    env = os.environ if environ is None else environ
    if not ray_tls_on(env):
        return None
    missing = [name for name in _FILES if not env.get(name)]
    if missing:
        raise ConfigurationError(
            f"RAY_USE_TLS is on but {', '.join(missing)} is not set: Ray's TLS needs "
            "RAY_TLS_SERVER_CERT, RAY_TLS_SERVER_KEY and RAY_TLS_CA_CERT on every node"
        )
    return env[_FILES[0]], env[_FILES[1]], env[_FILES[2]]


def _load(context: ssl.SSLContext, cert: str, key: str, ca: str) -> ssl.SSLContext:
    """`context` holding the node's certificate and trusting only the CA; a file missing,
    unreadable or not what it should be is a `ConfigurationError` naming it."""
    context.minimum_version = ssl.TLSVersion.TLSv1_2  # what gRPC accepts at least
    for what, path in (("RAY_TLS_SERVER_CERT", cert), ("RAY_TLS_SERVER_KEY", key)):
        _readable(what, path)
    try:
        # an encrypted key would make OpenSSL prompt on the terminal (a hang in an actor);
        # Ray's gRPC takes none, so an empty password fails it at once
        context.load_cert_chain(cert, key, password=lambda: b"")
    except (OSError, ValueError) as exc:
        raise ConfigurationError(
            f"Ray's TLS certificate {cert!r} and key {key!r} could not be loaded: {exc}"
        ) from None
    _readable("RAY_TLS_CA_CERT", ca)
    try:
        context.load_verify_locations(cafile=ca)
    except (OSError, ValueError) as exc:
        raise ConfigurationError(
            f"Ray's TLS CA certificate {ca!r} could not be loaded: {exc}"
        ) from None
    context.verify_mode = ssl.CERT_REQUIRED
    return context


def _readable(what: str, path: str) -> None:
    try:
        with open(path, "rb") as handle:
            handle.read(1)
    except OSError as exc:
        raise ConfigurationError(f"{what}={path!r} cannot be read: {exc.strerror or exc}") from None


def server_context(cert: str, key: str, ca: str) -> ssl.SSLContext:
    """A listening side's context: presents `cert`, requires a client certificate the CA
    signed."""
    return _load(ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER), cert, key, ca)


def client_context(cert: str, key: str, ca: str) -> ssl.SSLContext:
    """A dialing side's context: presents `cert`, verifies the server's chain against the
    CA; the name is checked after the handshake (`peer_matches`), as gRPC checks it."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    return _load(context, cert, key, ca)


def ray_server_context(environ: Mapping[str, str] | None = None) -> ssl.SSLContext | None:
    """The server context from Ray's settings; None when Ray's TLS is off."""
    files = _ray_files(environ)
    return None if files is None else server_context(*files)


def ray_client_context(environ: Mapping[str, str] | None = None) -> ssl.SSLContext | None:
    """The client context from Ray's settings; None when Ray's TLS is off."""
    files = _ray_files(environ)
    return None if files is None else client_context(*files)


def _ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(text.strip())
    except ValueError:
        return None


def _dns_matches(pattern: str, name: str) -> bool:
    pattern, name = pattern.lower().rstrip("."), name.lower().rstrip(".")
    if pattern == name:
        return True
    if not pattern.startswith("*.") or pattern.count(".") < 2:
        return False  # a wildcard stands for one label, under a name of two labels at least
    label, _, rest = name.partition(".")
    return bool(label) and rest == pattern[2:]


def peer_matches(cert: Mapping[str, Any] | None, host: str) -> bool:
    """Whether a verified peer certificate (`SSLSocket.getpeercert()`) names `host` by
    gRPC's rule (see the module docstring); False for no certificate."""
    if not cert:
        return False
    sans = [
        str(value)
        for kind, value in cert.get("subjectAltName", ())
        if kind in ("DNS", "IP Address")
    ]
    wanted = _ip(host)
    if wanted is not None:  # an IP: equal to an entry, whichever its kind
        return any(_ip(entry) == wanted for entry in sans)
    if sans:
        return any(_dns_matches(entry, host) for entry in sans)
    for rdn in cert.get("subject", ()):
        for key, value in rdn:
            if key == "commonName" and _dns_matches(str(value), host):
                return True
    return False
