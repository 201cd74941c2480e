"""A real MCP server built with the official SDK, for the tests.

Usage: python mcp_server.py [--calls FILE] [--delay SECONDS] [--http PORT]
stdio by default; streamable HTTP on 127.0.0.1:PORT (path `/mcp`) with `--http`.

Tools:
- `add(a, b)`: a + b.
- `record(note)`: appends "<note> <pid>" (fsync'd) to FILE (when given), then sleeps
  SECONDS (default 0): the SIGKILL test kills the worker while a call is inside it.
  Returns `noted <note>`.
- `whoami()`: the SHA-256 of the `X-Canary` header of the HTTP request (HTTP only), so a
  test can see a header secret arrive without its value being stored anywhere.
- `fail()`: answers a tool error (`isError`).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import time

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("wovyr-test")
OPTIONS = argparse.Namespace(calls=None, delay=0.0, http=None)


@server.tool()
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@server.tool()
def record(note: str) -> str:
    """Write a note down (a side effect the tests count)."""
    path = OPTIONS.calls
    if path:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, f"{note} {os.getpid()}\n".encode())
            os.fsync(fd)
        finally:
            os.close(fd)
    time.sleep(OPTIONS.delay)
    return f"noted {note}"


@server.tool()
def whoami(ctx: Context) -> str:
    """The SHA-256 of the X-Canary header this call came with."""
    request = ctx.request_context.request
    headers = getattr(request, "headers", None)
    value = str(headers.get("x-canary", "")) if headers is not None else ""
    return hashlib.sha256(value.encode()).hexdigest()


@server.tool()
def fail() -> str:
    """Always fails."""
    raise ToolError("this tool always fails")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls")
    parser.add_argument("--delay", type=float, default=0.0)
    parser.add_argument("--http", type=int)
    OPTIONS = parser.parse_args()
    if OPTIONS.http is not None:
        server.run(transport="streamable-http", host="127.0.0.1", port=OPTIONS.http)
    else:
        server.run()
