"""MCPTools against servers cantata did not write: the reference time server from PyPI
(``mcp-server-time``) over stdio, a small FastMCP-style server written here that returns
images, over streamable HTTP on 127.0.0.1, and the npm reference servers (filesystem and
everything, through ``npx``). What the model reads of a result is chosen for it: text as
text, images as images it sees (after the tool message on the Chat Completions wire), a
declared structured result as the value; a tool that runs only as a task is left out.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import struct
import sys
import zlib
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp.server.mcpserver import Image, MCPServer

from cantata.agents import ChatAgent
from cantata.core import ConfigurationError, DataContent, Message, ToolError
from cantata.models import ChatOptions, ScriptedChatClient, tool_call
from cantata.models._openai_mapping import to_openai_messages
from cantata.tools.mcp_tools import MCPTools, _result_value

from ..conftest import require_programs
from ..serve._servers import running

TIMEOUT = 120.0  # npx may fetch its package on a first run
EVERYTHING = "@modelcontextprotocol/server-everything@2026.8.31"
FILESYSTEM = "@modelcontextprotocol/server-filesystem@2026.8.31"
needs_npx = pytest.mark.usefixtures("_npx")


@pytest.fixture
def _npx() -> None:
    require_programs("npx")


def _png(width: int, height: int, rgb: tuple[int, int, int]) -> bytes:
    """A real PNG of one colour (written here: no image library needed)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = zlib.crc32(kind + data) & 0xFFFFFFFF
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)

    rows = b"".join(b"\x00" + bytes(rgb) * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


RED = _png(64, 64, (255, 0, 0))


class _Model:
    """A scripted model that calls one tool, then answers; keeps what it was sent."""

    def __init__(self, name: str, arguments: dict[str, Any]) -> None:
        self.call = (name, arguments)
        self.seen: list[list[Message]] = []

    def __call__(self, messages: list[Message], options: ChatOptions) -> Any:
        self.seen.append(list(messages))
        if len(self.seen) == 1:
            return [tool_call(*self.call)]
        return "seen"

    def tool_message(self) -> Message:
        (message,) = [m for m in self.seen[-1] if m.role == "tool"]
        return message


async def _run(tools: MCPTools, model: _Model) -> Message:
    agent = ChatAgent(ScriptedChatClient(model), name="viewer", tools=tools.tools)
    response = await agent.run("look")
    assert response.text == "seen"
    return model.tool_message()


# -- the PyPI reference server over stdio ------------------------------------------------


async def test_the_pypi_time_server_over_stdio(tmp_path: Path) -> None:
    server = [sys.executable, "-m", "mcp_server_time", "--local-timezone", "UTC"]
    arguments = {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"}
    with (tmp_path / "server.log").open("w") as errlog:
        async with asyncio.timeout(TIMEOUT), MCPTools(stdio=server, errlog=errlog) as mcp:
            assert sorted(t.name for t in mcp.tools) == ["convert_time", "get_current_time"]
            model = _Model("convert_time", arguments)
            message = await _run(mcp, model)
    (result,) = message.function_results
    assert result.error is None
    assert result.result["target"]["timezone"] == "Asia/Tokyo"
    assert result.result["target"]["datetime"].endswith("T21:00:00+09:00")
    assert result.result["time_difference"] == "+9.0h"


# -- images over streamable HTTP ---------------------------------------------------------


def _pictures() -> MCPServer:
    server = MCPServer("pictures")

    @server.tool(description="A red square, described.", structured_output=False)
    def red_square() -> list[Any]:
        return ["a 64x64 red square", Image(data=RED, format="png")]

    @server.tool(description="A picture, also as structured content (as some servers send).")
    def snapshot() -> types.CallToolResult:
        data = base64.b64encode(RED).decode()
        image = {"type": "image", "data": data, "mimeType": "image/png"}
        return types.CallToolResult(
            content=[types.ImageContent(data=data, mime_type="image/png")],
            structured_content={"content": [image]},
        )

    @server.tool(description="Counts the words of a text.")
    def count(text: str) -> dict[str, int]:
        return {"words": len(text.split())}

    return server


async def test_an_image_result_over_streamable_http_reaches_the_model_as_an_image() -> None:
    async with (
        running(_pictures().streamable_http_app()) as url,
        asyncio.timeout(TIMEOUT),
        MCPTools(url=f"{url}/mcp") as mcp,
    ):
        model = _Model("red_square", {})
        described = await _run(mcp, model)
        alone = await _run(mcp, _Model("snapshot", {}))
        counted = await _run(mcp, _Model("count", {"text": "three small words"}))

    (result,) = described.function_results
    assert result.result == "a 64x64 red square"
    assert [c for c in described.contents if type(c) is DataContent] == [
        DataContent("image/png", data=RED)
    ]
    # the structured copy of the image is not what the model reads
    (result,) = alone.function_results
    assert result.result == "[attached: image/png]"
    assert [c for c in alone.contents if type(c) is DataContent] == [
        DataContent("image/png", data=RED)
    ]
    # a declared structured result is the value
    (result,) = counted.function_results
    assert result.result == {"words": 3}

    # on the Chat Completions wire: the tool message is short text, the image follows
    wire = to_openai_messages(model.seen[-1])
    assert [w["role"] for w in wire] == ["user", "assistant", "tool", "user"]
    assert wire[2]["content"] == "a 64x64 red square"
    image = wire[3]["content"][1]
    assert image == {
        "type": "image_url",
        "image_url": {"url": "data:image/png;base64," + base64.b64encode(RED).decode()},
    }


# -- the npm reference servers ------------------------------------------------------------


@needs_npx
async def test_the_filesystem_servers_image_is_an_image_not_base64_text(tmp_path: Path) -> None:
    picture = tmp_path / "red.png"
    picture.write_bytes(RED)
    server = ["npx", "-y", FILESYSTEM, str(tmp_path)]
    with (tmp_path / "server.log").open("w") as errlog:
        async with asyncio.timeout(TIMEOUT), MCPTools(stdio=server, errlog=errlog) as mcp:
            message = await _run(mcp, _Model("read_media_file", {"path": str(picture)}))
            text = await _run(mcp, _Model("read_text_file", {"path": str(tmp_path / "log")}))
    (result,) = message.function_results
    assert result.error is None
    assert result.result == "[attached: image/png]"
    assert [c for c in message.contents if type(c) is DataContent] == [
        DataContent("image/png", data=RED)
    ]
    wire = to_openai_messages([message])
    assert len(wire[0]["content"]) < 100  # not the image's base64 as JSON
    assert wire[1]["content"][1]["image_url"]["url"].startswith("data:image/png;base64,")
    (failed,) = text.function_results  # a missing file is the server's error, for the model
    assert failed.error is not None


@needs_npx
async def test_a_tool_that_runs_only_as_a_task_is_left_out_with_a_log_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    server = ["npx", "-y", EVERYTHING, "stdio"]
    with (tmp_path / "server.log").open("w") as errlog:
        with caplog.at_level(logging.INFO, logger="cantata.tools.mcp"):
            async with asyncio.timeout(TIMEOUT), MCPTools(stdio=server, errlog=errlog) as mcp:
                names = {t.name for t in mcp.tools}
                message = await _run(mcp, _Model("get-tiny-image", {}))
        assert "simulate-research-query" not in names
        assert {"echo", "get-sum", "get-tiny-image"} <= names
        (line,) = [r.getMessage() for r in caplog.records if "left out" in r.getMessage()]
        assert "'simulate-research-query'" in line
        assert "taskSupport 'required'" in line
        (image,) = [c for c in message.contents if type(c) is DataContent]
        assert image.media_type == "image/png"
        assert image.data is not None and image.data.startswith(b"\x89PNG")
        (result,) = message.function_results
        assert "MCP logo" in result.result

        allow = ["simulate-research-query"]
        with pytest.raises(ConfigurationError, match="runs only as a task"):
            async with asyncio.timeout(TIMEOUT), MCPTools(stdio=server, errlog=errlog, allow=allow):
                pass


# -- the rule, result by result -----------------------------------------------------------


def _result(content: list[Any], structured: Any = None, error: bool = False) -> Any:
    return types.CallToolResult(content=content, structured_content=structured, is_error=error)


def test_content_is_chosen_for_the_model() -> None:
    text = [types.TextContent(text='{"words": 3}')]
    png = base64.b64encode(RED).decode()
    image = types.ImageContent(data=png, mime_type="image/png")
    # a declared output schema: the structured result is the value
    assert _result_value("t", "s", _result(text, {"words": 3}), declared=True) == {"words": 3}
    # undeclared structured content beside text: the text
    assert _result_value("t", "s", _result(text, {"words": 3}), declared=False) == text[0].text
    # no content at all: the structured content is all there is
    assert _result_value("t", "s", _result([], {"words": 3}), declared=False) == {"words": 3}
    # an image wins over any structured copy of it, declared or not
    for declared in (False, True):
        value = _result_value("t", "s", _result([image], {"content": [png]}), declared=declared)
        assert value == [DataContent("image/png", data=RED)]
    blob = types.EmbeddedResource(
        resource=types.BlobResourceContents(uri="file:///r.png", blob=png, mime_type="image/png")
    )
    assert _result_value("t", "s", _result([blob]), declared=False) == [
        DataContent("image/png", data=RED)
    ]
    bad = types.ImageContent(data="not base64!", mime_type="image/png")
    with pytest.raises(ToolError, match="not base64"):
        _result_value("t", "s", _result([bad]), declared=False)
    with pytest.raises(ToolError, match="reported an error: nope"):
        _result_value(
            "t", "s", _result([types.TextContent(text="nope"), image], error=True), declared=False
        )
