"""Hypothesis: any string given to `open_store` is a store or a `ConfigurationError`.

Nothing here connects: building a store never touches the network or the disk (stores
connect on first use), so arbitrary hosts and paths are safe to try. SQLite paths are
then opened for real, inside a temporary folder.
"""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cantata.core import CantataError, ConfigurationError, StoreError
from cantata.stores import SQLiteStore, StateStore, open_store

SCHEMES = [
    "memory://",
    "sqlite://",
    "sqlite:///",
    "sqlite:////",
    "postgresql://",
    "postgres://",
    "redis://",
    "rediss://",
    "unix://",
    "http://",
    "",
]
urls = st.builds(
    lambda scheme, rest: scheme + rest,
    st.sampled_from(SCHEMES),
    st.text(max_size=40)
    | st.from_regex(r"[a-z@:%/?=&.\[\]0-9-]{0,40}", fullmatch=True)
    | st.builds(
        lambda user, host, port, path: f"{user}@{host}:{port}/{path}",
        st.text(max_size=6),
        st.text(max_size=12),
        st.integers(-5, 99999).map(str) | st.text(max_size=4),
        st.text(max_size=8),
    ),
)
_counter = itertools.count()


def _close(store: StateStore) -> None:
    # Closing a store that never connected touches nothing outside the process.
    asyncio.run(store.close())


@given(urls)
def test_any_url_is_a_store_or_a_configuration_error(url: str) -> None:
    try:
        store = open_store(url)
    except ConfigurationError as exc:
        assert len(str(exc)) < 600
        return
    assert isinstance(store, StateStore)
    _close(store)


@given(st.text(max_size=30))
def test_any_sqlite_file_name_opens_or_is_a_typed_error(tmp_path: Path, name: str) -> None:
    if ".." in name or name.startswith(("/", "~")):
        return  # stay inside the test's folder
    folder = tmp_path / str(next(_counter))
    folder.mkdir()
    url = f"sqlite:///{folder}/{name}"

    async def use() -> Any:
        async with open_store(url) as store:
            await store.put("k", 1)
            return await store.get("k")

    try:
        assert asyncio.run(use()) == 1
    except (ConfigurationError, StoreError) as exc:
        assert len(str(exc)) < 800


@pytest.mark.parametrize("path", ["nul\x00inside.db", "lone\ud800.db"])
def test_sqlite_paths_that_no_file_can_have_are_refused_up_front(path: str) -> None:
    with pytest.raises(ConfigurationError, match="path"):
        SQLiteStore(path)
    with pytest.raises(CantataError):
        open_store(f"sqlite:///{path}")
