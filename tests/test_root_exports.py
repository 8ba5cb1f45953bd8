"""The root package offers the names a first program needs, and loads their layers lazily."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import cantata

FIRST_PROGRAM = {
    "ChatAgent",
    "tool",
    "WorkflowBuilder",
    "AgentExecutor",
    "LocalChatClient",
    "OpenAIChatClient",
    "ScriptedChatClient",
    "ChatOptions",
    "SQLiteStore",
    "Message",
    "LocalRuntime",
}


def test_the_first_program_names_are_exported() -> None:
    missing = FIRST_PROGRAM - set(cantata.__all__)
    assert not missing, f"cantata no longer exports {sorted(missing)}"


@pytest.mark.parametrize("name", [n for n in cantata.__all__ if n != "__version__"])
def test_each_root_name_is_the_layers_own(name: str) -> None:
    layer = cantata._EXPORTS[name]
    assert getattr(cantata, name) is getattr(importlib.import_module(f"cantata.{layer}"), name)
    assert name in dir(cantata)


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="Chat_Agent"):
        cantata.Chat_Agent  # noqa: B018


def test_importing_a_layer_does_not_load_the_others() -> None:
    code = "import sys, cantata.core; print('cantata.workflows' in sys.modules)"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "False"


def test_all_lists_exactly_the_lazy_names() -> None:
    assert set(cantata.__all__) == {*cantata._EXPORTS, "__version__"}
