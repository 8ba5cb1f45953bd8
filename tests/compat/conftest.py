"""The compat tests: client libraries people put in front of an OpenAI-compatible server
(the ``compat`` extra: langchain-openai, openai-agents, pydantic-ai-slim, litellm; the
Vercel AI SDK through Node), each against one real ``cantata serve`` on 127.0.0.1.

A library that is not installed skips its tests locally; under ``CI=true`` it fails them
(CI installs the extra).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from types import ModuleType

import pytest

from ..conftest import require_module
from ..serve._servers import cli_server

# litellm fetches a price list from the internet at import unless told to use its own copy
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")


HANDED = (
    "triage handed the conversation to billing: a payment question\n\n"
    "billing: about 'Is INV-7 paid?'"
)
"""The desk's first answer to a payment question: the handoff's note, then billing."""


def need(module: str) -> ModuleType:
    """`module`, or a skip (a failure under CI) when the compat extra lacks it."""
    return require_module(module, "pip install -e '.[compat]'")


@pytest.fixture(scope="session")
def base_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``cantata serve tests/compat/_served.py:served`` for the whole session: its URL."""
    store = f"sqlite:///{tmp_path_factory.mktemp('compat')}/serve.db"
    with cli_server("tests/compat/_served.py:served", "--store", store) as (url, _):
        yield url


@pytest.fixture
def v1(base_url: str) -> str:
    return f"{base_url}/v1"
