"""Direct streams under Ray's TLS settings (_tls.py, direct.py): mutual TLS with Ray's
files when ``RAY_USE_TLS`` is on, a peer without a certificate from the CA (or a plain TCP
one) refused with a typed error and no hang, plain TCP as before when it is off, and a
clear `ConfigurationError` for files that are missing or unreadable. No Ray cluster: the
certificates are made here, in a temporary directory."""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import ssl
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from cantata.core import ConfigurationError
from cantata.runtime.ray import _tls, wire
from cantata.runtime.ray.direct import (
    DirectClient,
    DirectServer,
    Refused,
    encode,
    read_frame,
)
from cantata.runtime.ray.router import Router

HOST = "127.0.0.1"


# -- certificates ----------------------------------------------------------------------


class _Ca(NamedTuple):
    key: ec.EllipticCurvePrivateKey
    name: x509.Name
    path: Path


class Node(NamedTuple):
    cert: str
    key: str
    ca: str


def _write_key(key: ec.EllipticCurvePrivateKey, path: Path) -> None:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )


def _make_ca(directory: Path, label: str) -> _Ca:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"test ca {label}")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    path = directory / f"ca-{label}.pem"
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return _Ca(key, name, path)


def _make_node(
    directory: Path,
    ca: _Ca,
    label: str,
    names: list[x509.GeneralName] | None = None,
    common_name: str = "ray node",
) -> Node:
    """A node certificate the CA signed, for `names` (127.0.0.1 as an IP entry unless
    given), its key, and the CA's file: what ``RAY_TLS_*`` point at."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
        .issuer_name(ca.name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=1))
    )
    sans = [x509.IPAddress(ipaddress.ip_address(HOST))] if names is None else names
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    cert = builder.sign(ca.key, hashes.SHA256())
    cert_path, key_path = directory / f"{label}.crt", directory / f"{label}.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    _write_key(key, key_path)
    return Node(str(cert_path), str(key_path), str(ca.path))


class Pki(NamedTuple):
    node: Node  # the cluster's: its CA signed it, for 127.0.0.1
    other: Node  # another CA's certificate for 127.0.0.1 (its CA file is that other CA)
    stray: Node  # the cluster CA's certificate for another address


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    directory = tmp_path_factory.mktemp("tls")
    ca, other_ca = _make_ca(directory, "cluster"), _make_ca(directory, "other")
    return Pki(
        node=_make_node(directory, ca, "node"),
        other=_make_node(directory, other_ca, "other"),
        stray=_make_node(
            directory, ca, "stray", [x509.IPAddress(ipaddress.ip_address("10.9.9.1"))]
        ),
    )


def _ray_env(monkeypatch: pytest.MonkeyPatch, node: Node, use: str = "1") -> None:
    monkeypatch.setenv("RAY_USE_TLS", use)
    monkeypatch.setenv("RAY_TLS_SERVER_CERT", node.cert)
    monkeypatch.setenv("RAY_TLS_SERVER_KEY", node.key)
    monkeypatch.setenv("RAY_TLS_CA_CERT", node.ca)


# -- helpers ---------------------------------------------------------------------------


class _Echo:
    """A request handler that answers each request with its id, and counts them."""

    def __init__(self) -> None:
        self.seen = 0

    async def __call__(self, frame: dict[str, Any]) -> wire.Envelope:
        self.seen += 1
        return wire.ok({"echo": frame["env"]["id"]})


async def _exchange(client: DirectClient, address: tuple[str, int, str], count: int) -> None:
    conn = await client.connection(address, 5)
    waiters = [await conn.call("q", {"id": f"m{i}"}) for i in range(count)]
    replies = await asyncio.wait_for(asyncio.gather(*waiters), 5)
    assert [wire.result(r, "echo") for r in replies] == [{"echo": f"m{i}"} for i in range(count)]


async def _refused(client: DirectClient, address: tuple[str, int, str]) -> Refused:
    """The client's typed refusal, which came from the peer rather than from the wait
    running out (that one says "within")."""
    with pytest.raises(Refused) as caught:
        await client.connection(address, 5)
    assert "within" not in str(caught.value), caught.value
    client.close()
    return caught.value


def _no_certificate_client(ca: str) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.load_verify_locations(cafile=ca)
    return context


def _client_with(cert_of: Node, trusting: str) -> ssl.SSLContext:
    context = _no_certificate_client(trusting)
    context.load_cert_chain(cert_of.cert, cert_of.key)
    return context


# -- TLS on ----------------------------------------------------------------------------


async def test_streams_under_ray_tls_exchange_requests(
    pki: Pki, monkeypatch: pytest.MonkeyPatch
) -> None:
    _ray_env(monkeypatch, pki.node, use="True")  # Ray's rule: 1 or true, any case
    echo = _Echo()
    server = DirectServer(echo, lambda frame: None)
    address = await server.start(HOST)
    client = DirectClient()
    try:
        await _exchange(client, address, 5)
        conn = client.open_connection(address)
        assert conn is not None
        transport_ssl = conn._writer.get_extra_info("ssl_object")
        assert transport_ssl is not None and transport_ssl.version() in ("TLSv1.2", "TLSv1.3")
        # the server required and verified this client's certificate (mutual TLS)
        assert echo.seen == 5
    finally:
        client.close()
        await server.close()


async def test_a_plain_tcp_peer_and_a_tls_server_do_not_talk(
    pki: Pki, monkeypatch: pytest.MonkeyPatch
) -> None:
    _ray_env(monkeypatch, pki.node)
    echo = _Echo()
    server = DirectServer(echo, lambda frame: None)
    host, port, secret = await server.start(HOST)
    try:
        await _refused(DirectClient(tls=None), (host, port, secret))
        # the bytes of a plain hello get no hello back: the connection just ends
        reader, writer = await asyncio.open_connection(host, port)
        writer.write(encode({"t": "h", "s": secret}))
        with pytest.raises(ConnectionError):  # reset, or the clean end read_frame reports
            if await asyncio.wait_for(read_frame(reader), 5) is None:
                raise ConnectionResetError("ended")
        writer.close()
        # and a TLS client against a plain server is refused too
        plain = DirectServer(echo, lambda frame: None, tls=None)
        plain_address = await plain.start(HOST)
        try:
            await _refused(DirectClient(), plain_address)
        finally:
            await plain.close()
        assert echo.seen == 0
        await _exchange(DirectClient(), (host, port, secret), 1)  # the server still serves
    finally:
        await server.close()


async def test_a_client_without_a_certificate_from_the_ca_is_refused(
    pki: Pki, monkeypatch: pytest.MonkeyPatch
) -> None:
    _ray_env(monkeypatch, pki.node)
    echo = _Echo()
    server = DirectServer(echo, lambda frame: None)
    address = await server.start(HOST)
    try:
        # trusts the server, presents nothing / presents another CA's certificate: the
        # server's TLS refuses it before the hello (its secret would not help it)
        await _refused(DirectClient(tls=_no_certificate_client(pki.node.ca)), address)
        await _refused(DirectClient(tls=_client_with(pki.other, pki.node.ca)), address)
        # another cluster's node (its own CA): it does not trust this server either
        other = _tls.client_context(pki.other.cert, pki.other.key, pki.other.ca)
        refused = await _refused(DirectClient(tls=other), address)
        assert "TLS" in str(refused)
        assert echo.seen == 0
        client = DirectClient()
        await _exchange(client, address, 2)  # a member of the cluster still gets through
        client.close()
    finally:
        await server.close()


async def test_a_server_whose_certificate_names_another_address_is_refused(
    pki: Pki, monkeypatch: pytest.MonkeyPatch
) -> None:
    _ray_env(monkeypatch, pki.node)
    echo = _Echo()
    stray = _tls.server_context(pki.stray.cert, pki.stray.key, pki.stray.ca)
    server = DirectServer(echo, lambda frame: None, tls=stray)
    address = await server.start(HOST)
    try:
        refused = await _refused(DirectClient(), address)
        assert "names another" in str(refused)
        assert echo.seen == 0  # the secret was not sent to it
    finally:
        await server.close()


async def test_an_ip_written_as_a_dns_name_is_accepted_as_grpc_accepts_it(
    pki: Pki, tmp_path: Path
) -> None:
    """Ray's own test certificates put node IPs in DNS entries; gRPC takes them."""
    ca = _make_ca(tmp_path, "dnsip")
    node = _make_node(tmp_path, ca, "dnsip", [x509.DNSName(HOST)])
    server = DirectServer(_Echo(), lambda frame: None, tls=_tls.server_context(*node))
    address = await server.start(HOST)
    client = DirectClient(tls=_tls.client_context(*node))
    try:
        await _exchange(client, address, 1)
    finally:
        client.close()
        await server.close()


def test_names_are_matched_by_grpcs_rule() -> None:
    def cert(*sans: tuple[str, str], cn: str = "node") -> dict[str, Any]:
        return {"subject": ((("commonName", cn),),), "subjectAltName": sans}

    assert _tls.peer_matches(cert(("IP Address", "10.0.0.5")), "10.0.0.5")
    assert _tls.peer_matches(cert(("DNS", "10.0.0.5")), "10.0.0.5")
    assert not _tls.peer_matches(cert(("IP Address", "10.0.0.6")), "10.0.0.5")
    assert _tls.peer_matches(cert(("IP Address", "0:0:0:0:0:0:0:1\n")), "::1")
    assert not _tls.peer_matches(cert(("DNS", "*.cluster.local")), "10.0.0.5")
    assert not _tls.peer_matches(cert(cn="10.0.0.5"), "10.0.0.5")  # no CN for an IP
    assert _tls.peer_matches(cert(("DNS", "*.cluster.local")), "node-1.cluster.local")
    assert not _tls.peer_matches(cert(("DNS", "*.cluster.local")), "a.node-1.cluster.local")
    assert not _tls.peer_matches(cert(("DNS", "*.local")), "cluster.local")
    assert _tls.peer_matches(cert(cn="head.example"), "head.example")  # no SAN: the CN
    assert not _tls.peer_matches(cert(("DNS", "x.example"), cn="head.example"), "head.example")
    assert not _tls.peer_matches({}, "10.0.0.5")
    assert not _tls.peer_matches(None, "10.0.0.5")


# -- TLS off, and settings that cannot work ---------------------------------------------


@pytest.mark.parametrize("use", [None, "0", "false", "yes"])
async def test_tls_off_keeps_plain_streams(
    pki: Pki, monkeypatch: pytest.MonkeyPatch, use: str | None
) -> None:
    if use is None:
        monkeypatch.delenv("RAY_USE_TLS", raising=False)
    else:  # "yes" is not on by Ray's rule either
        _ray_env(monkeypatch, pki.node, use=use)
    assert not _tls.ray_tls_on()
    echo = _Echo()
    server = DirectServer(echo, lambda frame: None)
    host, port, secret = await server.start(HOST)
    client = DirectClient()
    try:
        reader, writer = await asyncio.open_connection(host, port)  # plain bytes
        writer.write(encode({"t": "h", "s": secret}))
        assert await asyncio.wait_for(read_frame(reader), 5) == {"t": "h"}
        writer.close()
        await _exchange(client, (host, port, secret), 3)
    finally:
        client.close()
        await server.close()


def test_ray_tls_on_without_its_files_is_a_configuration_error(
    pki: Pki, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _ray_env(monkeypatch, pki.node)
    monkeypatch.delenv("RAY_TLS_CA_CERT")
    with pytest.raises(ConfigurationError, match="RAY_TLS_CA_CERT is not set"):
        DirectClient()
    # the runtime makes its router (and its client) as it starts: the error is there
    with pytest.raises(ConfigurationError, match="RAY_TLS_CA_CERT"):
        Router(pool="p", namespace="n", interventions=[], stop_grace=1.0)
    missing = str(tmp_path / "absent.pem")
    monkeypatch.setenv("RAY_TLS_CA_CERT", missing)
    with pytest.raises(ConfigurationError, match=r"RAY_TLS_CA_CERT='.*absent\.pem' cannot be read"):
        DirectServer(_Echo(), lambda frame: None)
    monkeypatch.setenv("RAY_TLS_CA_CERT", pki.node.ca)
    monkeypatch.setenv("RAY_TLS_SERVER_KEY", str(tmp_path))  # a directory: unreadable
    with pytest.raises(ConfigurationError, match="RAY_TLS_SERVER_KEY"):
        DirectClient()
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a certificate\n")
    monkeypatch.setenv("RAY_TLS_SERVER_KEY", pki.node.key)
    monkeypatch.setenv("RAY_TLS_SERVER_CERT", str(garbage))
    with pytest.raises(ConfigurationError, match="could not be loaded"):
        DirectServer(_Echo(), lambda frame: None)
    monkeypatch.setenv("RAY_TLS_SERVER_CERT", pki.other.cert)  # not the key's certificate
    with pytest.raises(ConfigurationError, match="could not be loaded"):
        DirectClient()
    # a key under a password (Ray's gRPC takes none): an error, never a password prompt
    monkeypatch.setenv("RAY_TLS_SERVER_CERT", pki.node.cert)
    locked = tmp_path / "locked.key"
    key = serialization.load_pem_private_key(Path(pki.node.key).read_bytes(), None)
    locked.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(b"secret"),
        )
    )
    monkeypatch.setenv("RAY_TLS_SERVER_KEY", str(locked))
    with pytest.raises(ConfigurationError, match="could not be loaded"):
        DirectServer(_Echo(), lambda frame: None)


# -- on a Ray cluster under TLS ----------------------------------------------------------


def _cluster_check() -> None:
    """Run in a child process whose environment turns Ray's TLS on: a one-node cluster,
    a runtime on it, one request to an agent's host, which must have gone over the direct
    stream; that host's server must refuse plain TCP, and this router's client be TLS.
    Every wait bounded; the cluster is shut down whatever happens."""
    import ray_agents as ra
    from ray.cluster_utils import Cluster

    import ray
    from cantata.runtime import AgentId
    from cantata.runtime.ray import RayRuntime
    from conftest import _node_args, free_port

    cluster = Cluster(initialize_head=True, head_node_args=_node_args(gcs_server_port=free_port()))
    try:
        ray.init(address=cluster.address, namespace="cantata-tls", log_to_driver=False)

        async def check() -> None:
            rt = RayRuntime(name="tls", default_timeout=60)
            await asyncio.wait_for(rt.start(), 60)
            try:
                await rt.register_factory("counter", ra.Counter)
                agent = AgentId("counter", "a")
                assert await asyncio.wait_for(rt.send_message(ra.Add(1), agent), 60) == 1
                assert rt._router is not None and rt._router.membership is not None
                owner = rt._router.membership.owner(str(agent))
                host = ray.get_actor(owner, namespace="cantata")
                paths = await asyncio.wait_for(host.paths.remote(), 60)
                assert paths == {"ray": 0, "direct": 1}, paths
                address = await asyncio.wait_for(host.direct_address.remote(), 60)
                with pytest.raises(Refused):
                    await DirectClient(tls=None).connection(tuple(address), 10)
                assert rt._router is not None and rt._router._direct._ssl is not None
            finally:
                await asyncio.wait_for(rt.close(), 60)

        asyncio.run(check())
        print("TLS CLUSTER OK")
    finally:
        ray.shutdown()
        cluster.shutdown()


def test_a_cluster_under_ray_tls_carries_requests_over_tls_streams(tmp_path: Path) -> None:
    """A second Ray cluster (one node, ~10 s), in a child process: Ray reads its TLS
    settings when it is imported, and this session's cluster runs without them."""
    import os
    import signal
    import socket
    import subprocess
    import sys

    import ray

    ips = {HOST, socket.gethostbyname(socket.gethostname()), ray.util.get_node_ip_address()}
    ca = _make_ca(tmp_path, "cluster")
    node = _make_node(
        tmp_path, ca, "node", [x509.IPAddress(ipaddress.ip_address(ip)) for ip in sorted(ips)]
    )
    here = str(Path(__file__).parent)
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env |= {
        "RAY_USE_TLS": "1",
        "RAY_TLS_SERVER_CERT": node.cert,
        "RAY_TLS_SERVER_KEY": node.key,
        "RAY_TLS_CA_CERT": node.ca,
        "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
        "PYTHONPATH": os.pathsep.join([here, env.get("PYTHONPATH", "")]).rstrip(os.pathsep),
    }
    child = subprocess.Popen(
        [sys.executable, "-c", "import test_direct_tls as t; t._cluster_check()"],
        env=env,
        cwd=here,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its own process group: Ray's processes end with it
    )
    try:
        out, _ = child.communicate(timeout=240)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        out, _ = child.communicate(timeout=30)
        pytest.fail(f"the TLS cluster did not finish in 240 s:\n{out[-4000:]}")
    assert child.returncode == 0 and "TLS CLUSTER OK" in out, out[-4000:]
