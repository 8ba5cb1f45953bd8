"""File tools for the magentic file reader: confined to their root, whatever the path says."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cantata.core import ConfigurationError, ToolError
from cantata.models import ScriptedChatClient, tool_call
from cantata.teams import file_reader_agent
from cantata.tools import FileAccessError, FileTools


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    (root / "docs").mkdir(parents=True)
    (root / "docs" / "a.txt").write_text("alpha")
    (root / "b.txt").write_text("beta")
    (tmp_path / "secret.txt").write_text("do not read")
    os.symlink(tmp_path / "secret.txt", root / "link.txt")
    return root


def test_reads_and_lists_files_under_the_root(tree: Path) -> None:
    files = FileTools(tree)
    assert files.read_file("b.txt") == "beta"
    assert files.read_file("docs/a.txt") == "alpha"
    assert files.read_file(str(tree / "docs" / "a.txt")) == "alpha"
    assert files.list_files() == ["b.txt", "docs/a.txt"]  # the link leading out is not listed
    assert files.list_files("docs") == ["docs/a.txt"]


@pytest.mark.parametrize(
    "path", ["../secret.txt", "link.txt", "docs/../../secret.txt", "/etc/passwd"]
)
def test_paths_leading_outside_are_refused(tree: Path, path: str) -> None:
    files = FileTools(tree)
    with pytest.raises(FileAccessError, match="outside the readable root") as info:
        files.read_file(path)
    assert info.value.path == path and info.value.root == str(tree)
    assert isinstance(info.value, ToolError)


def test_missing_files_and_bad_names_are_typed_errors(tree: Path) -> None:
    files = FileTools(tree)
    with pytest.raises(FileAccessError, match="call list_files"):
        files.read_file("nope.txt")
    with pytest.raises(FileAccessError, match="not a usable file name"):
        files.read_file("a\x00b")
    with pytest.raises(FileAccessError, match="not a directory"):
        files.list_files("b.txt")


def test_long_files_are_cut(tree: Path) -> None:
    (tree / "long.txt").write_text("x" * 100)
    text = FileTools(tree, max_bytes=10).read_file("long.txt")
    assert text.startswith("x" * 10) and "cut" in text


def test_bad_configuration(tree: Path) -> None:
    with pytest.raises(ConfigurationError, match="not a directory"):
        FileTools(tree / "b.txt")
    with pytest.raises(ConfigurationError, match="max_bytes"):
        FileTools(tree, max_bytes=0)


def test_schema_lists_the_files_when_asked(tree: Path) -> None:
    listed = {t.name: t for t in FileTools(tree, list_in_schema=True).tools()}
    assert listed["read_file"].parameters["properties"]["path"]["enum"] == ["b.txt", "docs/a.txt"]
    plain = {t.name: t for t in FileTools(tree).tools()}
    assert "enum" not in plain["read_file"].parameters["properties"]["path"]


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.lists(
        st.sampled_from(["..", ".", "docs", "b.txt", "link.txt", "/", "secret.txt", "x"]),
        max_size=6,
    )
)
def test_no_path_ever_reads_outside(tree: Path, parts: list[str]) -> None:
    files = FileTools(tree)
    path = "/".join(parts)
    try:
        text = files.read_file(path)
    except FileAccessError:
        return
    assert text != "do not read"


async def test_file_reader_agent_reads_through_its_tool(tree: Path) -> None:
    client = ScriptedChatClient([[tool_call("read_file", {"path": "b.txt"})], "It says beta."])
    reader = file_reader_agent(client, tree)
    response = await reader.run("What does b.txt say?")
    results = [c for m in response.messages if m.role == "tool" for c in m.contents]
    assert results[0].result == "beta"
    assert client.calls[0].options.tool_choice == "required"


async def test_file_reader_agent_sends_a_refusal_to_the_model(tree: Path) -> None:
    client = ScriptedChatClient([[tool_call("read_file", {"path": "../secret.txt"})], "Refused."])
    reader = file_reader_agent(client, tree, list_in_schema=False)
    response = await reader.run("Read the secret")
    results = [c for m in response.messages if m.role == "tool" for c in m.contents]
    assert results[0].is_error and "do not read" not in str(results[0])
