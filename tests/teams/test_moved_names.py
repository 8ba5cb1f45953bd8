"""The code executor and the file tools moved to cantata.tools: their old names in
cantata.teams (the package and the two old modules) still resolve, to the very same
objects, with a DeprecationWarning that names the new import."""

from __future__ import annotations

import importlib
import warnings

import pytest

import cantata.teams
import cantata.tools
from cantata.teams._moved import BEHIND, MOVED_TO_TOOLS

OLD_MODULE_NAMES = {
    "cantata.teams.code_executor": [
        "CodeExecutionError",
        "CodeResult",
        "LocalCodeExecutor",
        "MAX_CODE_CHARS",
        "extract_code",
        "python_tool",
    ],
    "cantata.teams.file_tools": ["FileAccessError", "FileTools"],
}


@pytest.mark.parametrize("name", sorted(MOVED_TO_TOOLS))
def test_a_moved_name_resolves_from_cantata_teams_with_a_warning(name: str) -> None:
    new_home = importlib.import_module(MOVED_TO_TOOLS[name])
    with pytest.warns(DeprecationWarning, match=rf"cantata\.teams\.{name} moved.*cantata\.tools"):
        value = getattr(cantata.teams, name)
    assert value is getattr(new_home, name)
    assert name not in cantata.teams.__all__  # a star import does not warn


@pytest.mark.parametrize(
    ("module", "name"), [(m, n) for m, names in OLD_MODULE_NAMES.items() for n in names]
)
def test_the_old_modules_still_import_with_a_warning(module: str, name: str) -> None:
    old = importlib.import_module(module)
    with pytest.warns(DeprecationWarning, match="moved"):
        value = getattr(old, name)
    assert value is getattr(importlib.import_module(MOVED_TO_TOOLS[name]), name)


def test_from_import_of_an_old_path_warns_at_the_importing_line() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        from cantata.teams.code_executor import LocalCodeExecutor, coder_agent

    assert LocalCodeExecutor is cantata.tools.LocalCodeExecutor
    assert coder_agent is cantata.teams.coder_agent
    assert {w.category for w in caught} == {DeprecationWarning}
    assert all(w.filename == __file__ for w in caught)
    assert any("import it from cantata.teams" in str(w.message) for w in caught)


def test_the_agents_made_of_those_tools_stay_in_teams_without_a_warning() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for name in ("coder_agent", "CodeRunnerAgent", "file_reader_agent"):
            assert name in cantata.teams.__all__
            assert getattr(cantata.teams, name) is not None


def test_an_unknown_name_is_still_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        _ = cantata.teams.nothing_here  # type: ignore[attr-defined]
    old = importlib.import_module("cantata.teams.file_tools")
    with pytest.raises(AttributeError):
        _ = old.nothing_here


@pytest.mark.parametrize("name", sorted(BEHIND))
def test_the_executors_protocol_resolves_from_cantata_teams_with_a_warning(name: str) -> None:
    home = BEHIND[name]
    with pytest.warns(DeprecationWarning, match=rf"cantata\.teams\.{name} moved.*{home}"):
        value = getattr(cantata.teams, name)
    assert value is getattr(importlib.import_module(home), name)
    assert name not in cantata.teams.__all__
