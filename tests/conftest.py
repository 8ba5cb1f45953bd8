"""Shared test set-up.

Real model requests are blocked unless a test carries a real-model marker, so a unit test
that reaches a real model by accident fails loudly. Services (PostgreSQL, Redis) are
looked for on 127.0.0.1: a test that needs one skips when it is missing, except under
``CI=true``, where a missing service fails the run.

Hypothesis runs under one of two profiles: ``ci`` (the default, and what CI runs: 50
cases, a few seconds per fuzz test) and ``thorough`` (10,000 cases, for a local
hunt: ``HYPOTHESIS_PROFILE=thorough pytest tests/core tests/stores``). A fuzz test that
should follow the profile leaves ``max_examples`` unset.

On pytest-xdist workers (``make unit``), llama.cpp's OpenMP threads sleep while they wait
instead of spinning: two workers decoding at once on two cores each spin on cores the
other needs. Measured on two cores, one local-model team test took 13 s alone, and 52 s
for each of two copies run at once with spinning threads, 23 s with sleeping ones. Alone,
sleeping threads made it slower (20 s), so a run in one process keeps llama.cpp's default.
"""

from __future__ import annotations

import os

if os.environ.get("PYTEST_XDIST_WORKER"):  # before llama.cpp's libgomp is loaded
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
import importlib
import shutil
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from cantata.models import set_model_requests_allowed

IN_CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}
REAL_MODEL_MARKERS = ("local_model", "openai_server")
_RAY_TESTS = Path(__file__).parent / "ray"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The Ray tests share one session's cluster: when pytest-xdist spreads the suite over
    workers (``make unit``, ``--dist loadgroup``), they all run on one of them. They come
    first, so that worker starts on them (the longest group, several minutes) while the
    other takes the rest, and neither waits alone at the end."""
    ray = {item for item in items if item.path.is_relative_to(_RAY_TESTS)}
    for item in ray:
        item.add_marker(pytest.mark.xdist_group("ray"))
    items.sort(key=lambda item: item not in ray)  # stable: each part keeps its order


# Fixtures are per test, not per case, in every fuzz test here (they hold a store or a
# runtime that each case uses afresh), and cases that reach a real server are slow.
_FUZZ_CHECKS = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
# "ci" keeps the whole suite inside CI's time budget on a two-core machine (many cases
# cross a real server); "thorough" is for a long run by hand.
settings.register_profile(
    "ci", max_examples=50, deadline=None, suppress_health_check=_FUZZ_CHECKS, print_blob=True
)
settings.register_profile(
    "thorough", max_examples=10_000, deadline=None, suppress_health_check=_FUZZ_CHECKS
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(autouse=True)
def _guard_model_requests(request: pytest.FixtureRequest) -> Iterator[None]:
    real = any(request.node.get_closest_marker(m) for m in REAL_MODEL_MARKERS)
    set_model_requests_allowed(real)
    yield
    set_model_requests_allowed(True)


# A closed connection's thread ends right after `close()` returns; this is a bound for a
# busy machine, not a measured time.
_THREAD_EXIT_BOUND = 5.0


def _aiosqlite_workers() -> set[threading.Thread]:
    # aiosqlite names no thread of its own; Python adds the target's name to the default.
    return {t for t in threading.enumerate() if t.name.endswith("(_connection_worker_thread)")}


@pytest.fixture(autouse=True)
def _sqlite_connections_closed() -> Iterator[None]:
    """Every SQLite connection a test opens is closed by the end of that test.

    An `SQLiteStore` left open keeps its aiosqlite worker thread until the garbage collector
    finds the connection, often in a later test; aiosqlite then stops the thread with a
    future on whatever event loop it finds, and when that loop closes first the thread
    raises "Event loop is closed" into the later test (a `PytestUnhandledThreadExceptionWarning`
    seen once in CI on a test that uses no SQLite). This check names the test that leaked.
    """
    before = _aiosqlite_workers()
    yield
    left = _aiosqlite_workers() - before
    for thread in left:
        thread.join(_THREAD_EXIT_BOUND)
    alive = [t.name for t in left if t.is_alive()]
    assert not alive, (
        f"{len(alive)} aiosqlite connection(s) opened by this test were never closed: "
        "close every SQLiteStore (async with store, or await store.close())"
    )


def service_reachable(host: str, port: int, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def require_service(name: str, host: str, port: int) -> None:
    """Skip the test when the service is down, or fail it under CI."""
    if service_reachable(host, port):
        return
    message = f"{name} is not reachable on {host}:{port}"
    if IN_CI:
        pytest.fail(f"{message}, and CI is set: start it (see .ci/run)")
    pytest.skip(message)


def require_module(name: str, install: str) -> ModuleType:
    """`name` imported; when it is missing, skip the test, or fail it under CI (where the
    project's extras are installed). `install` says how to get it."""
    try:
        return importlib.import_module(name)
    except ImportError:
        if IN_CI:
            pytest.fail(f"{name} is not installed, and CI is set: {install}")
        pytest.skip(f"{name} is not installed ({install})")


def require_programs(*names: str) -> None:
    """Skip the test when a program is not on PATH, or fail it under CI (where .ci/run's
    machine has them)."""
    missing = [n for n in names if shutil.which(n) is None]
    if not missing:
        return
    message = f"{', '.join(missing)} not on PATH"
    if IN_CI:
        pytest.fail(f"{message}, and CI is set")
    pytest.skip(message)


@pytest.fixture
def postgres_dsn() -> str:
    require_service("PostgreSQL", "127.0.0.1", 5432)
    return os.environ.get("CANTATA_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")


@pytest.fixture
def redis_url() -> str:
    require_service("Redis", "127.0.0.1", 6379)
    return os.environ.get("CANTATA_TEST_REDIS", "redis://127.0.0.1:6379/0")


@pytest.fixture
def spans() -> Iterator[Any]:
    """Tracing on for one test, into an in-memory exporter (`get_finished_spans()`)."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from cantata.core import tracing

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.configure(provider)
    try:
        yield exporter
    finally:
        tracing.configure(False)
        provider.shutdown()
