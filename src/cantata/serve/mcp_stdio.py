"""``python -m cantata.serve.mcp_stdio module:object``: serve over MCP on stdin/stdout.

What an MCP client configured with a command runs (Claude Desktop, an IDE, `MCPTools`):
the object (an agent, workflow or team, or a dict or list of them) is loaded as
`cantata serve` loads it, and each becomes one tool. Logs go to stderr: stdout carries the
protocol.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from collections.abc import Sequence

from ..core import CantataError
from .mcp_server import DEFAULT_MCP_CALL_TIMEOUT, run_mcp_stdio
from .served import load_target

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the stdio server; returns the process exit code (2 for a bad target)."""
    parser = argparse.ArgumentParser(
        prog="python -m cantata.serve.mcp_stdio",
        description="Serve cantata agents, workflows or teams as MCP tools over stdio.",
    )
    parser.add_argument("target", help="module:object or path/file.py:object")
    parser.add_argument("--name", default="cantata", help="the server's name")
    parser.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_MCP_CALL_TIMEOUT,
        help="seconds one call may run (default %(default)s)",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    try:
        served = load_target(args.target)
        asyncio.run(run_mcp_stdio(served, name=args.name, call_timeout=args.timeout))
    except CantataError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
