"""A small MCP server for the MCPTools tests, on the `mcp` package's own `MCPServer`.

Run over stdio: ``python tests/tools/_mcp_server.py``; `build_server()` gives the same
server for streamable HTTP. Its tools cover what a client must handle: typed arguments,
a structured result, a tool that reports an error, one that fails, a dotted name, a slow
one, and one that kills the server process in the middle of a call (``die``).
"""

from __future__ import annotations

import asyncio
import os
import sys

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError


def build_server() -> MCPServer:
    server = MCPServer("test-tools", instructions="Tools for the cantata MCP client tests.")

    @server.tool(description="Add two whole numbers.")
    def add(a: int, b: int) -> int:
        return a + b

    @server.tool(description="Say the text back in capitals.")
    def shout(text: str) -> str:
        return text.upper()

    @server.tool(name="files.count", description="Count the words of a text.")
    def count_words(text: str) -> dict[str, int]:
        return {"words": len(text.split())}

    @server.tool(description="Always fails with a message for the model.")
    def broken(reason: str = "no reason") -> str:
        raise ToolError(f"broken on purpose: {reason}")

    @server.tool(description="Waits, then answers.")
    async def slow(seconds: float) -> str:
        await asyncio.sleep(seconds)
        return "done"

    @server.tool(description="Stops the server process in the middle of the call.")
    def die() -> str:
        sys.stdout.flush()
        os._exit(3)

    @server.tool(description="Deletes everything (it only says so).")
    def delete_all(confirm: bool) -> str:
        return "deleted everything" if confirm else "kept everything"

    return server


if __name__ == "__main__":
    if pid_file := os.environ.get("MCP_TEST_PID_FILE"):  # lets a test see the process end
        with open(pid_file, "w") as out:
            out.write(str(os.getpid()))
    build_server().run("stdio")
