"""Identities of `cantata serve`, piece by piece: the keys file's parser (good files, and any
text: a map or a `KeysFileError`), the trusted header's rules (which addresses, which
names), the middleware's answers (401, 403, 400) on the app itself, the store view that
keeps each identity's keys apart, and memory scopes under an owner."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from cantata.agents import Memory
from cantata.core import ConfigurationError, current_owner, owned_by
from cantata.models.embeddings import HashEmbeddingClient
from cantata.serve import (
    HeaderTrust,
    KeysFileError,
    OwnedStore,
    ServeKeys,
    build_app,
    check_bind,
    check_identity_name,
    parse_keys,
    read_keys_file,
)
from cantata.stores import MemoryStore, open_item_store

from ._servers import ROOT, echo_agent

KEY_A = "alice-key-0123456789"
KEY_B = "bob-key-0123456789ab"


def test_a_keys_file_maps_each_key_to_its_identity() -> None:
    text = f"# clients\n\nalice:{KEY_A}\n  bob : {KEY_B}  \nalice:{KEY_A}-rotated\n"
    assert parse_keys(text) == {KEY_A: "alice", KEY_B: "bob", f"{KEY_A}-rotated": "alice"}
    # a key may hold colons and any printable character; it is what follows the first colon
    assert parse_keys("svc.bot@example.com:a:b c+/=%-0123456789") == {
        "a:b c+/=%-0123456789": "svc.bot@example.com"
    }


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("alice " + KEY_A, ["line 1", "colon"]),
        (f"../x:{KEY_A}", ["line 1", "not an identity name"]),
        (f"anonymous:{KEY_A}", ["reserved"]),
        ("alice:short", ["line 1", "at least 16"]),
        (f"alice:{KEY_A}\nbob:{KEY_A}", ["line 2", "already the key of 'alice'"]),
        ("# nothing\n\n", ["holds no keys"]),
        (f"alice:{KEY_A}\x07", ["control character"]),
    ],
)
def test_a_bad_keys_file_says_which_line_and_why(text: str, words: list[str]) -> None:
    with pytest.raises(KeysFileError) as caught:
        parse_keys(text)
    message = str(caught.value)
    assert all(w in message for w in words), message
    assert KEY_A not in message  # never the key itself


@given(st.text(max_size=300) | st.lists(st.text(max_size=40), max_size=6).map(":".join))
def test_any_text_is_keys_or_a_keys_file_error(text: str) -> None:
    try:
        keys = parse_keys(text)
    except KeysFileError:
        return
    assert keys
    for key, name in keys.items():
        assert len(key) >= 16 and key == key.strip() and key.isprintable()
        assert check_identity_name(name) == name


@given(st.binary(max_size=200))
def test_any_file_is_keys_or_a_keys_file_error(
    tmp_path_factory: pytest.TempPathFactory, data: bytes
) -> None:
    path = tmp_path_factory.mktemp("keys") / "keys"
    path.write_bytes(data)
    with contextlib.suppress(KeysFileError):
        assert read_keys_file(path)


def test_a_missing_keys_file_is_a_keys_file_error(tmp_path: Path) -> None:
    with pytest.raises(KeysFileError, match="cannot read the keys file"):
        read_keys_file(tmp_path / "nope")


def test_keys_and_token_must_not_overlap_and_keys_allow_serving_off_loopback() -> None:
    with pytest.raises(ConfigurationError, match="also the key of identity 'alice'"):
        ServeKeys.of(token=KEY_A, keys={KEY_A: "alice"})
    check_bind("0.0.0.0", None, identities=True)
    with pytest.raises(ConfigurationError, match="without a token"):
        check_bind("0.0.0.0", None)


@pytest.mark.parametrize(
    ("header", "proxies", "words"),
    [
        ("X-User", [], "needs --trusted-proxy"),
        ("X User", ["127.0.0.1"], "not a header name"),
        ("Authorization", ["127.0.0.1"], "another meaning"),
        ("X-User", ["localhost"], "not an address or network"),
    ],
)
def test_a_header_trust_that_cannot_hold_is_refused(
    header: str, proxies: list[str], words: str
) -> None:
    with pytest.raises(ConfigurationError, match=words):
        HeaderTrust(header, proxies)


@given(st.text(max_size=60))
def test_any_proxy_spec_is_a_network_or_a_configuration_error(spec: str) -> None:
    try:
        trust = HeaderTrust("X-User", [spec])
    except ConfigurationError:
        return
    assert isinstance(trust.trusts(("127.0.0.1", 1)), bool)


def test_a_header_is_trusted_from_the_proxies_only() -> None:
    trust = HeaderTrust("X-Forwarded-User", ["127.0.0.1", "10.1.0.0/16", "::1"])
    assert trust.trusts(("127.0.0.1", 5)) and trust.trusts(("10.1.200.3", 5))
    assert trust.trusts(("::ffff:10.1.0.9", 5)) and trust.trusts(("::1", 5))
    assert not trust.trusts(("10.2.0.1", 5)) and not trust.trusts(("127.0.0.2", 5))
    assert not trust.trusts(None) and not trust.trusts(("not-an-address", 5))


async def _call(app: object, client: str, headers: dict[str, str]) -> httpx.Response:
    transport = httpx.ASGITransport(app=app, client=(client, 4000))  # type: ignore[arg-type]
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
        body = {"model": "echo", "input": "hi"}
        return await http.post("/v1/responses", json=body, headers=headers)


async def _owners(store: MemoryStore) -> set[str]:
    return {k.split("/", 1)[0] if k.startswith("@") else "" for k in await store.keys("")}


async def test_the_middleware_finds_the_identity_or_refuses() -> None:
    async with MemoryStore() as store:
        app = build_app(
            echo_agent(),
            store=store,
            keys={KEY_A: "alice", KEY_B: "bob"},
            trust_identity_header="X-Forwarded-User",
            trusted_proxies=["10.0.0.0/24"],
        )
        assert (await _call(app, "10.0.9.9", {})).status_code == 401
        wrong = await _call(app, "10.0.9.9", {"Authorization": "Bearer nope-nope-nope-nope"})
        assert wrong.status_code == 401 and wrong.json()["error"]["code"] == "invalid_api_key"
        ok = await _call(app, "10.0.9.9", {"Authorization": f"Bearer {KEY_A}"})
        assert ok.status_code == 200 and await _owners(store) == {"@alice"}
        # the header from a proxy is the identity, with no key
        carol = await _call(app, "10.0.0.7", {"X-Forwarded-User": "carol@example.com"})
        assert carol.status_code == 200
        assert await _owners(store) == {"@alice", "@carol@example.com"}
        # from anyone else it is refused, even with a good key beside it
        forged = {"X-Forwarded-User": "alice", "Authorization": f"Bearer {KEY_B}"}
        refused = await _call(app, "10.0.9.9", forged)
        assert refused.status_code == 403
        assert refused.json()["error"]["code"] == "identity_header_untrusted"
        for bad in ("../etc", "anonymous", ""):
            res = await _call(app, "10.0.0.7", {"X-Forwarded-User": bad})
            assert res.status_code == 400, (bad, res.text)
        # a proxy's request without the header needs a key as any other
        assert (await _call(app, "10.0.0.7", {})).status_code == 401
        assert await _owners(store) == {"@alice", "@carol@example.com"}


async def test_without_keys_every_request_is_anonymous_and_unprefixed() -> None:
    async with MemoryStore() as store:
        app = build_app(echo_agent(), store=store)
        assert (await _call(app, "127.0.0.1", {})).status_code == 200
        assert await _owners(store) == {""}  # the keys a server without identities wrote


def test_trusted_proxies_without_a_header_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="--trust-identity-header"):
        build_app(echo_agent(), trusted_proxies=["127.0.0.1"])


async def test_the_owned_store_keeps_each_owner_to_its_namespace() -> None:
    async with MemoryStore() as inner:
        store = OwnedStore(inner)
        await store.put("k", "anon")
        await store.append("log", ["anon"])
        with owned_by("alice"):
            assert current_owner() == "alice"
            assert await store.get("k") is None and await store.length("log") == 0
            await store.put("k", "alice")
            await store.put_many({"a:1": 1, "a:2": 2})
            assert await store.put_if_absent("a:1", 9) is False
            await store.append("log", ["alice"])
            assert await store.keys("") == ["a:1", "a:2", "k"]
            assert await store.keys("a:") == ["a:1", "a:2"]
        with owned_by("bob"):
            assert await store.keys("") == [] and await store.get("k") is None
            await store.delete("k")  # only bob's, which is not there
        assert current_owner() is None
        assert await store.get("k") == "anon" and await store.keys("") == ["k"]
        assert await store.read("log") == ["anon"]
        assert await inner.get("@alice/k") == "alice" and await inner.read("@alice/log") == [
            "alice"
        ]


async def test_a_memory_scope_run_for_an_owner_is_its_own() -> None:
    memory = Memory(
        open_item_store("memory://", dimensions=16), HashEmbeddingClient(16), ("facts",)
    )
    await memory.remember(memory.namespace(), "the anonymous fact")
    with owned_by("alice"):
        await memory.remember(memory.namespace(), "alice's fact")
        assert memory.namespace() == ("@alice", "facts")
        assert [f.text for f in await memory.facts(memory.namespace())] == ["alice's fact"]
    with owned_by("bob"):
        assert await memory.facts(memory.namespace()) == []
    assert [f.text for f in await memory.facts(memory.namespace())] == ["the anonymous fact"]


def test_a_bad_keys_file_stops_the_server_at_start(tmp_path: Path) -> None:
    keys = tmp_path / "keys"
    keys.write_text(f"alice:{KEY_A}\nbob:short\n", encoding="utf-8")
    command = [sys.executable, "-m", "cantata.cli", "serve", "tests/serve/_servers.py:echo"]
    done = subprocess.run(
        [*command, "--port", "0", "--keys-file", str(keys)],
        cwd=ROOT, capture_output=True, timeout=120, check=False,
    )  # fmt: skip
    err = " ".join(done.stderr.decode().split())
    assert done.returncode == 1, err
    assert "line 2: the key of 'bob' has 5 characters" in err
    assert "Traceback" not in err and ":short" not in err  # never the key
