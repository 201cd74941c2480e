"""The MCP client: a tenant's MCP servers, their tools listed and called with the official
`mcp` SDK (an optional extra, imported only when a call is made).

A server is `stdio` (a program the worker starts and talks to over its stdin/stdout) or
`http` (a streamable-HTTP endpoint). Which servers an attempt may reach is decided above
this layer (the tenant's registry, `wovyr mcp add`): the worker hands an `McpAccess` in
`Dispatch.mcp`, holding the servers' configurations and a way to resolve their header
secrets (in the worker, at the call, never stored).

The tenant's `SideEffectPolicy` governs every connection:

- a stdio server is a process on the host: it starts only where the policy lets steps run
  programs (`shell: true`, and its program in `shell_commands` when that is a list), else
  `PolicyDenied`, before anything is started; its environment is the SDK's minimal one
  (never the worker's variables);
- an http server's host is resolved and checked like an `http` step's target
  (`wovyr.activities.egress`), and every request is sent to a checked address (no DNS
  rebinding between the check and the connection).

An `mcp` step's call opens one session (a stdio server is started for it and stopped
after); an `agent` attempt keeps one session per server it names (`McpSessions`) for its
listing and all its calls. Nothing outlives an attempt, so a worker killed mid-call leaves
no session to resume, and the call is made again by the next attempt. Errors never carry a
header's value.

With tracing on, each tool call inside an attempt is a span, a child of the attempt's
(`mcp.call <server>/<tool>`): the server and the tool, an error status when the call
failed or the tool answered `isError`; never the arguments, the result or a header.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from wovyr.activities import egress
from wovyr.activities.base import ActivityError, NonRetryableError
from wovyr.activities.outbound import tls_context
from wovyr.activities.policy import SideEffectPolicy
from wovyr.traces import call_span

if TYPE_CHECKING:
    from mcp import ClientSession
    from mcp.types import CallToolResult

__all__ = [
    "MCP_TOOL_PREFIX",
    "McpAccess",
    "McpServerConfig",
    "McpSessions",
    "McpTool",
    "call_tool",
    "check_stdio_allowed",
    "list_tools",
    "parse_tool_ref",
]

MCP_TOOL_PREFIX = "mcp:"
_DEFAULT_TIMEOUT = 60.0
_MAX_TEXT = 2000


@dataclass(frozen=True)
class McpServerConfig:
    """How to reach one MCP server (`header_secrets`: header -> the tenant's secret NAME)."""

    name: str
    transport: Literal["stdio", "http"]
    command: tuple[str, ...] | None = None
    url: str | None = None
    header_secrets: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class McpTool:
    """One tool a server lists: its name, description and the JSON Schema of its input."""

    server: str
    name: str
    description: str
    input_schema: dict[str, Any]

    @property
    def ref(self) -> str:
        return f"{MCP_TOOL_PREFIX}{self.server}/{self.name}"


@dataclass(frozen=True)
class McpAccess:
    """What an attempt may reach: the tenant's servers, and `headers`, which resolves one
    server's header secrets to the values sent (raises an `ActivityError` naming a missing
    secret, never a value)."""

    servers: Mapping[str, McpServerConfig]
    headers: Callable[[McpServerConfig], dict[str, str]] = field(repr=False)
    sessions: McpSessions | None = field(default=None, repr=False)  # kept open for an attempt

    def server(self, name: str) -> McpServerConfig:
        try:
            return self.servers[name]
        except KeyError:
            known = ", ".join(sorted(self.servers)) or "none"
            raise NonRetryableError(
                f"no MCP server named {name!r} is registered for this tenant "
                f"(wovyr mcp add {name} ...); registered: {known}",
                type="UnknownMcpServer",
            ) from None


def parse_tool_ref(ref: str) -> tuple[str, str | None]:
    """(`server`, `tool` or None) of `mcp:SERVER/TOOL` or `mcp:SERVER`."""
    body = ref.removeprefix(MCP_TOOL_PREFIX)
    server, _, tool = body.partition("/")
    return server, (tool or None)


def check_stdio_allowed(command: tuple[str, ...], policy: SideEffectPolicy) -> None:
    """`PolicyDenied` unless `policy` lets steps run the program `command[0]` on the host."""
    if not policy.shell:
        raise NonRetryableError(
            "a stdio MCP server is a process on the host, and the side-effect policy does "
            "not allow running programs (shell: false); an admin must allow shell for this "
            "tenant, or register the server by --url",
            type="PolicyDenied",
        )
    commands = policy.shell_commands
    if commands is None:
        return
    program = command[0]
    if "/" not in program and program in commands:
        return
    found = program if "/" in program else shutil.which(program)
    paths = {os.path.normpath(entry) for entry in commands if "/" in entry}
    if found is None or os.path.normpath(os.path.abspath(found)) not in paths:
        raise NonRetryableError(
            f"the stdio MCP server's program {program!r} is not in the side-effect policy's "
            "command allow-list (shell_commands)",
            type="PolicyDenied",
        )


def _require_sdk() -> None:
    """A clear failure, not retried, when the `mcp` extra is not installed."""
    import importlib.util

    if importlib.util.find_spec("mcp") is None:
        raise NonRetryableError(
            "the MCP SDK is not installed in this worker (pip install 'wovyr[mcp]')",
            type="McpSdkMissing",
        )


def _scrub(text: str, secrets: Mapping[str, str]) -> str:
    for value in secrets.values():
        if value:
            text = text.replace(value, "***")
    return text[:_MAX_TEXT]


def _leaf_errors(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaf_errors(inner)]
    return [exc]


def _failure(server: str, exc: BaseException, headers: Mapping[str, str]) -> ActivityError:
    """The `ActivityError` an exception of the SDK or the connection becomes."""
    from mcp import MCPError

    leaves = _leaf_errors(exc)
    for leaf in leaves:
        if isinstance(leaf, ActivityError):
            return leaf
    leaf = leaves[0] if leaves else exc
    if isinstance(leaf, MCPError):
        return NonRetryableError(
            f"MCP server {server!r} answered an error: {_scrub(leaf.error.message, headers)}",
            type="McpError",
        )
    message = _scrub(f"{type(leaf).__name__}: {leaf}", headers)
    return ActivityError(f"MCP server {server!r} is unavailable: {message}", type="McpUnavailable")


class _PinnedTransport:
    """An httpx2 transport that sends each request to an address checked against the
    policy (the host resolved here), keeping the name for `Host` and TLS.

    It has the whole shape of `httpx2.AsyncBaseTransport` (not subclassed: httpx2 comes
    with the `mcp` extra and is imported at the first call): the client enters its
    transport as an async context manager and leaves it when it closes."""

    def __init__(self, policy: SideEffectPolicy) -> None:
        import httpx2

        self._inner = httpx2.AsyncHTTPTransport(verify=tls_context())
        self._policy = policy

    async def __aenter__(self) -> _PinnedTransport:
        await self._inner.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self._inner.__aexit__(*exc)

    async def handle_async_request(self, request: Any) -> Any:
        import httpx2

        return await egress.send_pinned(
            httpx2, request, request.url.host, self._policy, self._inner.handle_async_request
        )

    async def aclose(self) -> None:
        await self._inner.aclose()


async def _check_url(url: str, policy: SideEffectPolicy) -> None:
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise NonRetryableError("an MCP server URL is http:// or https://", type="InvalidUrl")
    if not policy.private_network:
        port = parts.port or (443 if parts.scheme == "https" else 80)
        await egress.checked_addresses(parts.hostname, port, policy)


@contextlib.asynccontextmanager
async def _session(
    config: McpServerConfig,
    headers: Mapping[str, str],
    policy: SideEffectPolicy,
    timeout: float | None,
) -> AsyncIterator[ClientSession]:
    """An initialized session with `config`'s server (started for it when stdio)."""
    from mcp import ClientSession

    seconds = timeout or _DEFAULT_TIMEOUT
    async with contextlib.AsyncExitStack() as stack:
        if config.transport == "stdio":
            from mcp import StdioServerParameters, stdio_client

            assert config.command
            check_stdio_allowed(config.command, policy)
            params = StdioServerParameters(command=config.command[0], args=[*config.command[1:]])
            read, write = await stack.enter_async_context(stdio_client(params))
        else:
            import httpx2
            from mcp.client.streamable_http import streamable_http_client

            assert config.url
            await _check_url(config.url, policy)
            transport = None if policy.private_network else _PinnedTransport(policy)
            client = httpx2.AsyncClient(
                headers=dict(headers),
                timeout=httpx2.Timeout(seconds),
                transport=transport,  # type: ignore[arg-type]
                verify=tls_context(),  # the process's: building one costs 15-30 ms of CPU
            )
            await stack.enter_async_context(client)
            read, write = await stack.enter_async_context(
                streamable_http_client(config.url, http_client=client)
            )
        session = await stack.enter_async_context(
            ClientSession(read, write, read_timeout_seconds=seconds)
        )
        await session.initialize()
        yield session


async def _headers(access: McpAccess, config: McpServerConfig) -> dict[str, str]:
    """The header values of an http server (its secrets read off the event loop)."""
    if config.transport != "http" or not config.header_secrets:
        return {}
    import asyncio  # with the first call (a read of an execution loads every kind's module)

    return await asyncio.to_thread(access.headers, config)


class McpSessions:
    """Sessions kept open for one attempt (an `agent`'s: its servers are listed once and
    each call reuses the session, rather than a stdio server started per call).

    Enter it, and open sessions (`session`), in one task: the SDK's sessions must be left
    in the task that entered them. Other tasks may call through a session that is open.
    """

    def __init__(self, access: McpAccess, policy: SideEffectPolicy, timeout: float | None) -> None:
        self._access, self._policy, self._timeout = access, policy, timeout
        self._open: dict[str, ClientSession] = {}
        self._headers: dict[str, str] = {}  # every header value sent: scrubbed from errors
        self._stack = contextlib.AsyncExitStack()

    async def __aenter__(self) -> McpSessions:
        await self._stack.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        try:
            await self._stack.__aexit__(*exc)
        except Exception as failure:
            if exc[1] is not None:
                return  # the error that ended the attempt is the one to report
            raise _failure("(closing)", failure, self._headers) from None

    def get(self, server: str) -> ClientSession | None:
        return self._open.get(server)

    @property
    def sent(self) -> Mapping[str, str]:
        """The header values sent so far (what an error must not show)."""
        return self._headers

    async def session(self, server: str) -> ClientSession:
        """The open session with `server`, opened now if it is not (in the entering task)."""
        found = self._open.get(server)
        if found is None:
            config = self._access.server(server)
            headers = await _headers(self._access, config)
            self._headers.update(headers)
            try:
                found = await self._stack.enter_async_context(
                    _session(config, headers, self._policy, self._timeout)
                )
            except Exception as exc:
                raise _failure(server, exc, headers) from None
            self._open[server] = found
        return found


async def _list(session: ClientSession, server: str) -> list[McpTool]:
    tools: list[McpTool] = []
    cursor: str | None = None
    while True:
        params = None
        if cursor is not None:
            from mcp.types import PaginatedRequestParams

            params = PaginatedRequestParams(cursor=cursor)
        page = await session.list_tools(params=params)
        for tool in page.tools:
            schema = dict(tool.input_schema or {"type": "object"})
            tools.append(McpTool(server, tool.name, tool.description or "", schema))
        cursor = page.next_cursor
        if not cursor:
            return tools


async def list_tools(
    access: McpAccess, server: str, policy: SideEffectPolicy, timeout: float | None = None
) -> list[McpTool]:
    """The tools `server` lists (`tools/list`, every page); through `access.sessions`
    (opened there) when the attempt keeps sessions."""
    _require_sdk()
    if access.sessions is not None:
        session = await access.sessions.session(server)
        try:
            return await _list(session, server)
        except Exception as exc:
            raise _failure(server, exc, access.sessions.sent) from None
    config = access.server(server)
    headers = await _headers(access, config)
    try:
        async with _session(config, headers, policy, timeout) as session:
            return await _list(session, server)
    except Exception as exc:
        raise _failure(server, exc, headers) from None


async def call_tool(
    access: McpAccess,
    server: str,
    tool: str,
    arguments: dict[str, Any],
    policy: SideEffectPolicy,
    timeout: float | None = None,
) -> dict[str, Any]:
    """Call `tool` of `server` (`tools/call`): `{text, content, structured_content?,
    is_error}` (`text`: the text blocks joined; other blocks are in `content`). Through
    the attempt's open session with `server` when there is one, else in a session of its
    own."""
    _require_sdk()
    attributes = {
        "wovyr.mcp.server": server,
        "gen_ai.tool.name": tool,
        "mcp.method.name": "tools/call",
    }
    with call_span(f"mcp.call {server}/{tool}", attributes) as span:
        result = await _call(access, server, tool, arguments, policy, timeout)
        if result.is_error:
            span.failed("McpToolError")
    content = [block.model_dump(mode="json", exclude_none=True) for block in result.content]
    text = "\n".join(str(b.get("text", "")) for b in content if b.get("type") == "text")
    output: dict[str, Any] = {"text": text, "content": content, "is_error": result.is_error}
    if result.structured_content is not None:
        output["structured_content"] = json.loads(json.dumps(result.structured_content))
    return output


async def _call(
    access: McpAccess,
    server: str,
    tool: str,
    arguments: dict[str, Any],
    policy: SideEffectPolicy,
    timeout: float | None,
) -> CallToolResult:
    """One `tools/call` through the attempt's open session with `server`, else in a
    session of its own; its failures as attempt errors."""
    kept = access.sessions.get(server) if access.sessions is not None else None
    if kept is not None:
        assert access.sessions is not None
        try:
            result = await kept.call_tool(tool, arguments)
        except Exception as exc:
            raise _failure(server, exc, access.sessions.sent) from None
    else:
        config = access.server(server)
        headers = await _headers(access, config)
        try:
            async with _session(config, headers, policy, timeout) as session:
                result = await session.call_tool(tool, arguments)
        except Exception as exc:
            raise _failure(server, exc, headers) from None
    from mcp.types import CallToolResult

    if not isinstance(result, CallToolResult):
        raise NonRetryableError(
            f"MCP server {server!r} asked for input the engine cannot give", type="McpError"
        )
    return result
