"""A fake MCP server for tests: a real MCP server (the official `mcp` SDK, the `mcp` extra)
whose tools are plain Python functions, run as a program of its own, over stdio (the worker
starts it for each attempt) or over streamable HTTP on 127.0.0.1 (started here, on a free
port). Every call it receives is recorded (fsync'd), so a test sees what reached it.

    def lookup(order_id: str) -> dict:
        \"\"\"Look an order up.\"\"\"
        return {"order_id": order_id, "status": "shipped"}

    with FakeMCPServer([lookup]) as orders:          # stdio: `orders.command`
        orders.register(engine, "orders")            # `wovyr mcp add orders ...`
        ...                                          # an agent calls `mcp:orders/lookup`
        orders.calls                                 # [ToolCall("lookup", {...}, pid)]

    with FakeMCPServer([lookup], transport="http") as orders:
        orders.url                                   # http://127.0.0.1:PORT/mcp

A tool is a module-level function (the server process imports it by its module and name, so
not a lambda nor a nested function), sync or async; its parameters and docstring are the
tool's schema and description, what it returns is the result, an exception a tool error.
Without tools, the server offers the built-in ones: `add(a, b)`, `record(note)`,
`whoami()` (the SHA-256 of the HTTP request's `X-Canary` header, so a test sees a header
secret arrive without its value) and `fail()` (always a tool error).

`python -m wovyr.testing.mcp_server [--tool MODULE:NAME]... [--path DIR]... [--calls FILE]
[--delay SECONDS] [--http PORT [--port-file FILE]]` is the server program (`--delay`: each
call waits after it is recorded, so a test can kill a worker while a call is inside the tool;
`--http 0`: on a free port that the program binds itself and writes to `--port-file` once it
holds it, so no other process can take the port between its choice and its use).
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import importlib
import importlib.util
import inspect
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from mcp.server.mcpserver import Context

    from wovyr.engine.engine import Engine

__all__ = ["BUILTIN_TOOLS", "FakeMCPServer", "ToolCall", "add", "fail", "main", "record", "whoami"]

NEEDS_MCP = "the fake MCP server needs the MCP SDK: pip install 'wovyr[mcp]' (the `mcp` extra)"


def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def record(note: str) -> str:
    """Write a note down (a side effect the tests count)."""
    return f"noted {note}"


def whoami(ctx: Context) -> str:
    """The SHA-256 of the X-Canary header this call came with."""
    request = ctx.request_context.request
    headers = getattr(request, "headers", None)
    value = str(headers.get("x-canary", "")) if headers is not None else ""
    return hashlib.sha256(value.encode()).hexdigest()


def fail() -> str:
    """Always fails."""
    raise RuntimeError("this tool always fails")


BUILTIN_TOOLS: tuple[Callable[..., Any], ...] = (add, record, whoami, fail)
BUILTIN = {fn.__name__: fn for fn in BUILTIN_TOOLS}


@dataclass(frozen=True)
class ToolCall:
    """One call the server received: the tool, its arguments, the server's process id."""

    tool: str
    arguments: dict[str, Any]
    pid: int


def _reference(fn: Callable[..., Any]) -> tuple[str, Path | None]:
    """`MODULE:NAME` of a tool, and the directory its module is imported from."""
    name, module = getattr(fn, "__qualname__", ""), getattr(fn, "__module__", "")
    if not name.isidentifier() or module in ("", "__main__") or sys.modules.get(module) is None:
        raise ValueError(
            f"tool {name or fn!r}: a fake MCP server's tool is a module-level function of an "
            "importable module (the server process imports it), not a lambda, a nested "
            "function nor a function of __main__"
        )
    file = getattr(sys.modules[module], "__file__", None)
    root = Path(file).resolve().parents[module.count(".")] if file else None
    return f"{module}:{name}", root


class FakeMCPServer:
    """An MCP server offering `tools` (a context manager; `transport` "stdio" or "http")."""

    def __init__(
        self,
        tools: Iterable[Callable[..., Any]] = BUILTIN_TOOLS,
        *,
        transport: Literal["stdio", "http"] = "stdio",
        delay: float = 0.0,
    ) -> None:
        if importlib.util.find_spec("mcp") is None:
            raise ImportError(NEEDS_MCP)
        if transport not in ("stdio", "http"):
            raise ValueError(f"transport {transport!r}: 'stdio' or 'http'")
        self.transport = transport
        self.delay = delay
        self._tools: list[Callable[..., Any]] = []
        for fn in tools:
            self.tool(fn)
        self._dir: Path | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._url: str | None = None
        self._kept: list[ToolCall] | None = None  # the calls, once stopped

    def tool(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """Offer `fn` too (a decorator; a stdio server's next start offers it)."""
        _reference(fn)
        self._tools.append(fn)
        return fn

    @property
    def calls_file(self) -> Path:
        if self._dir is None:
            raise RuntimeError("the fake MCP server is not started: use it in a `with` block")
        return self._dir / "calls.jsonl"

    @property
    def command(self) -> list[str]:
        """The command that runs this server over stdio (what a worker starts)."""
        command = [sys.executable, "-m", "wovyr.testing.mcp_server"]
        roots: list[str] = []
        for fn in self._tools:
            ref, found = _reference(fn)
            command += ["--tool", ref]
            if found is not None and not ref.startswith("wovyr.") and str(found) not in roots:
                roots.append(str(found))
        for root in roots:
            command += ["--path", root]
        command += ["--calls", str(self.calls_file)]
        return command + (["--delay", str(self.delay)] if self.delay else [])

    @property
    def url(self) -> str:
        """The streamable-HTTP endpoint (transport "http")."""
        if self._url is None:
            raise RuntimeError("the fake MCP server serves HTTP only with transport='http'")
        return self._url

    @property
    def fields(self) -> dict[str, Any]:
        """The server's registration (`wovyr mcp add` fields): its command, or its URL."""
        return {"url": self.url} if self.transport == "http" else {"command": self.command}

    def register(self, engine: Engine, name: str) -> None:
        """Register this server as the engine tenant's MCP server `name`."""
        from wovyr.platform.mcp import add_mcp_server, parse_mcp_server

        policy = engine.side_effect_policy()
        at = engine.clock.now()
        record = parse_mcp_server(engine.tenant, name, self.fields, policy=policy, by="test", at=at)
        add_mcp_server(engine.store, record)

    @property
    def calls(self) -> list[ToolCall]:
        """Every call received so far, in order (from every process of a stdio server);
        after the `with` block, every call it received."""
        if self._kept is not None:
            return list(self._kept)
        if not self.calls_file.exists():
            return []
        *lines, _partial = self.calls_file.read_text().split("\n")  # whole lines only
        return [ToolCall(**json.loads(line)) for line in lines]

    def __enter__(self) -> FakeMCPServer:
        self._dir = Path(tempfile.mkdtemp(prefix="wovyr-mcp-"))
        self._kept = None
        if self.transport == "http":
            self._serve_http()
        return self

    def _serve_http(self) -> None:
        folder = self.calls_file.parent
        port_file = folder / "port"
        log = (folder / "server.log").open("wb")
        with log:
            self._process = subprocess.Popen(
                [*self.command, "--http", "0", "--port-file", str(port_file)],
                stdout=log,
                stderr=log,
            )
        deadline = time.monotonic() + 30
        port = 0
        while not port or not _listening(port):
            port = int(port_file.read_text()) if port_file.exists() else 0
            if self._process.poll() is not None or time.monotonic() > deadline:
                output = (folder / "server.log").read_text()
                self.__exit__()
                raise RuntimeError(f"the fake MCP server did not start: {output}")
            time.sleep(0.05)
        self._url = f"http://127.0.0.1:{port}/mcp"

    def __exit__(self, *exc: object) -> None:
        if self._process is not None:
            self._process.terminate()
            self._process.wait(timeout=10)
            self._process = None
        self._url = None
        if self._dir is not None:
            self._kept = self.calls
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True


def _recorded(
    name: str,
    fn: Callable[..., Any],
    calls: str | None,
    delay: float,
    context: str | None,
    error: type[Exception],
) -> Callable[..., Any]:
    """`fn`, recording each call (fsync'd, without its `context` argument), then waiting
    `delay` seconds; what it raises answers as a tool error (`error`)."""

    def note(kwargs: dict[str, Any]) -> None:
        if calls:
            arguments = {k: v for k, v in kwargs.items() if k != context}
            line = json.dumps({"tool": name, "arguments": arguments, "pid": os.getpid()})
            with open(calls, "a") as file:  # one write of a whole line, on disk when read
                file.write(f"{line}\n")
                file.flush()
                os.fsync(file.fileno())
        time.sleep(delay)

    if inspect.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def run_async(*args: Any, **kwargs: Any) -> Any:
            note(kwargs)
            try:
                return await fn(*args, **kwargs)
            except Exception as exc:
                raise error(str(exc)) from exc

        return run_async

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        note(kwargs)
        try:
            return fn(*args, **kwargs)
        except Exception as exc:
            raise error(str(exc)) from exc

    return run


def main(argv: Sequence[str] | None = None) -> int:
    """The server program (see the module's docstring)."""
    parser = argparse.ArgumentParser(prog="python -m wovyr.testing.mcp_server")
    parser.add_argument("--tool", action="append", default=[], help="MODULE:NAME")
    parser.add_argument("--path", action="append", default=[], help="a directory to import from")
    parser.add_argument("--calls", help="the file each call is recorded in (JSON lines)")
    parser.add_argument("--delay", type=float, default=0.0)
    parser.add_argument("--http", type=int, metavar="PORT")
    parser.add_argument("--port-file", help="with --http: where the port served is written")
    options = parser.parse_args(argv)
    try:
        from mcp.server import MCPServer
        from mcp.server.mcpserver import Context
        from mcp.server.mcpserver.exceptions import ToolError
        from mcp.server.mcpserver.utilities.context_injection import find_context_parameter
    except ImportError:
        print(NEEDS_MCP, file=sys.stderr)
        return 2
    globals()["Context"] = Context  # resolves `whoami`'s annotation for the SDK
    sys.path[:0] = options.path
    tools = [_load(ref) for ref in options.tool] or list(BUILTIN_TOOLS)
    server = MCPServer("wovyr-fake")
    for fn in tools:
        name = fn.__name__
        context = find_context_parameter(fn)
        run = _recorded(name, fn, options.calls, options.delay, context, ToolError)
        server.add_tool(run, name=name)
    if options.http is not None:
        _serve(server.streamable_http_app(host="127.0.0.1"), options.http, options.port_file)
    else:
        server.run()
    return 0


def _serve(app: Any, port: int, port_file: str | None) -> None:
    """Serve `app` on 127.0.0.1:`port` (0: a free one) from a socket bound here, then
    written to `port_file` (whole, by a rename) before the first request is served."""
    import uvicorn

    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    if port_file:
        part = Path(f"{port_file}.part")
        part.write_text(str(sock.getsockname()[1]))
        part.replace(port_file)
    config = uvicorn.Config(app, log_level="warning")
    uvicorn.Server(config).run(sockets=[sock])


def _load(reference: str) -> Callable[..., Any]:
    module, _, name = reference.partition(":")
    if module == "wovyr.testing.mcp_server":  # this module, when run as __main__
        return BUILTIN[name]
    fn: Callable[..., Any] = getattr(importlib.import_module(module), name)
    return fn


if __name__ == "__main__":
    raise SystemExit(main())
