"""Wovyr as an MCP server: MCP clients list workflows and agents, start them, read their
status and result, signal, approve and cancel - as the tenant and role of an API key.

Two transports share one set of tools (`build_server`):

- stdio (`wovyr mcp serve`): the key is `WOVYR_API_KEY`, checked once at start-up against
  the store's keys (`stdio_principal`); every call acts as that key.
- streamable HTTP, served by the API server at `/mcp` (`http_app`): every request carries
  `Authorization: Bearer <key>` (401 without a valid one), and every tool call acts as the
  key of its own request.

Roles are the API's (`wovyr.platform.auth`): a viewer lists and reads; starting,
signalling, approving and cancelling need an operator. Another tenant's execution answers
exactly like a missing one. A refused call is an MCP tool error (`isError`) saying why;
engine calls run off the event loop. The `mcp` SDK (the `mcp` extra) is imported by this
module, which the CLI and the app import only when they serve MCP.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any

# The SDK resolves a tool's `ctx: Context` from this module's globals: imported here, and
# this module is imported only where an MCP server is built (the CLI and the app do so
# lazily).
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool

from wovyr.definition.agent import AGENT_PREFIX
from wovyr.engine.agents import agent_run, list_agents, start_agent_run
from wovyr.engine.engine import Engine
from wovyr.errors import WovyrError
from wovyr.platform.auth import Authenticator, Principal, bearer_token

if TYPE_CHECKING:
    from starlette.types import ASGIApp

__all__ = [
    "KeyRefused",
    "PrincipalOf",
    "build_server",
    "http_app",
    "sessions_running",
    "stdio_principal",
]

PrincipalOf = Callable[["Context[Any, Any]"], Principal]


class KeyRefused(WovyrError):
    """The API key is missing, unknown or revoked."""


def stdio_principal(engine: Engine, token: str | None) -> Principal:
    """The principal of `token` (`WOVYR_API_KEY`), or `KeyRefused` saying what to do."""
    if not token:
        raise KeyRefused(
            "wovyr mcp serve needs an API key in WOVYR_API_KEY",
            hint="wovyr admin keys create --tenant TENANT --role operator",
        )
    principal = Authenticator(engine.store, engine.clock).verify(token)
    if principal is None:
        raise KeyRefused("the API key in WOVYR_API_KEY is unknown or revoked")
    return principal


def _text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def _execution(engine: Engine, execution_id: str) -> dict[str, Any]:
    view = engine.query(execution_id)
    found: dict[str, Any] = {
        "id": view.id,
        "workflow": view.workflow,
        "version": view.version,
        "status": view.status,
        "output": view.output,
        "error": view.error,
        "waiting_on": view.waiting_on,
        "created_at": view.created_at,
        "updated_at": view.updated_at,
    }
    if view.pending_waits:
        found["pending_waits"] = view.pending_waits
    return found


class _Server(MCPServer[Any]):
    """The MCP server over one engine. Its tools are the process's (`_tools`), and each
    call finds the engine and who makes it through `ctx.mcp_server`."""

    def __init__(self, engine: Engine, principal_of: PrincipalOf) -> None:
        super().__init__("wovyr", instructions=_INSTRUCTIONS, tools=_tools())
        self.engine = engine
        self.principal_of = principal_of


_INSTRUCTIONS = (
    "Durable workflows and agents: list, start, read status and result, signal, approve, cancel."
)


def build_server(engine: Engine, principal_of: PrincipalOf) -> MCPServer:
    """The MCP server over `engine`; `principal_of` says who makes each call."""
    return _Server(engine, principal_of)


async def _act(
    ctx: Context[Any, Any], needed: str, work: Callable[[Engine, Principal], Any]
) -> str:
    """`work` as the caller (its key checked off the event loop), if its role may."""
    server = ctx.mcp_server
    if not isinstance(server, _Server):  # these tools serve the server `build_server` made
        raise ToolError("this tool is served by Wovyr's MCP server only")
    try:
        principal = await asyncio.to_thread(server.principal_of, ctx)
    except WovyrError as exc:
        raise ToolError(exc.message) from None
    if not principal.can(needed):
        raise ToolError(f"the API key's role {principal.role!r} may not do this ({needed} needed)")
    tenant = server.engine.for_tenant(principal.tenant).acting(principal.audit_actor)
    try:
        result = await asyncio.to_thread(work, tenant, principal)
    except WovyrError as exc:
        raise ToolError(str(exc)) from None
    return _text(result)


async def list_workflows(ctx: Context[Any, Any]) -> str:
    """The workflow definitions registered for the tenant (name and version, latest
    first)."""

    def work(e: Engine, p: Principal) -> Any:
        records = e.store.list_registered(e.tenant)
        return [
            {"name": r.name, "version": r.version}
            for r in records
            if not r.name.startswith(AGENT_PREFIX)
        ]

    return await _act(ctx, "viewer", work)


async def list_agents_tool(ctx: Context[Any, Any]) -> str:
    """The agents registered for the tenant (name, version, description)."""

    def work(e: Engine, p: Principal) -> Any:
        return [
            {"name": d.name, "version": d.version, "description": d.metadata.description}
            for d, _ in list_agents(e)
        ]

    return await _act(ctx, "viewer", work)


async def start_workflow(
    ctx: Context[Any, Any],
    workflow: str,
    input: dict[str, Any] | None = None,
    version: str | None = None,
    execution_id: str | None = None,
) -> str:
    """Start an execution of registered workflow `workflow` (its latest version, or
    `version`) with `input`; starting an `execution_id` that exists returns it."""

    def work(e: Engine, p: Principal) -> Any:
        started = e.submit(
            None, input or {}, name=workflow, version=version, execution_id=execution_id
        )
        return {"id": started.record.id, "created": started.created, **_status(e, started)}

    return await _act(ctx, "operator", work)


async def start_agent(
    ctx: Context[Any, Any], agent: str, input: str, run_id: str | None = None
) -> str:
    """Start a run of registered agent `agent` with the task `input`."""

    def work(e: Engine, p: Principal) -> Any:
        started = start_agent_run(e, agent, input, run_id=run_id)
        return {"id": started.record.id, "created": started.created, **_status(e, started)}

    return await _act(ctx, "operator", work)


async def get_execution(ctx: Context[Any, Any], execution_id: str) -> str:
    """An execution's status, output (once completed), error and what it waits for."""
    return await _act(ctx, "viewer", lambda e, _p: _execution(e, execution_id))


async def get_agent_run(ctx: Context[Any, Any], run_id: str) -> str:
    """An agent run's status, turns, usage, cost and result."""

    def work(e: Engine, p: Principal) -> Any:
        run = agent_run(e, run_id)
        return {
            "id": run.id,
            "agent": run.agent,
            "status": run.status,
            "turns": run.turns,
            "usage": run.usage,
            "cost": run.cost,
            "result": run.result,
            "error": run.error,
        }

    return await _act(ctx, "viewer", work)


async def signal(ctx: Context[Any, Any], execution_id: str, name: str, payload: Any = None) -> str:
    """Send signal `name` (with `payload`) to an execution."""

    def work(e: Engine, p: Principal) -> Any:
        e.signal(execution_id, name, payload)
        return _execution(e, execution_id)

    return await _act(ctx, "operator", work)


async def approve(
    ctx: Context[Any, Any],
    execution_id: str,
    activity: str,
    approved: bool = True,
    comment: str | None = None,
) -> str:
    """Decide the approval that activity `activity` of an execution waits for."""

    def work(e: Engine, p: Principal) -> Any:
        e.approve(execution_id, activity, approved, by=p.actor, comment=comment)
        return _execution(e, execution_id)

    return await _act(ctx, "operator", work)


async def cancel(ctx: Context[Any, Any], execution_id: str, reason: str | None = None) -> str:
    """Cancel an execution (its children too); answers once the cancel is durable."""

    def work(e: Engine, p: Principal) -> Any:
        e.cancel(execution_id, reason=reason, by=p.actor)
        return _execution(e, execution_id)

    return await _act(ctx, "operator", work)


@functools.cache
def _tools() -> list[Tool]:
    """The tools, built once per process: the models of their arguments (what the SDK
    builds from each signature) were two thirds of an app's construction. Every server
    shares them; a call reaches its own server's engine through its context."""
    tools: list[Callable[..., Any]] = [list_workflows, list_agents_tool, start_workflow]
    tools += [start_agent, get_execution, get_agent_run, signal, approve, cancel]
    return [Tool.from_function(fn, name=fn.__name__.removesuffix("_tool")) for fn in tools]


def _status(engine: Engine, started: Any) -> dict[str, Any]:
    return {"status": engine.query(started.record.id).status}


def http_app(
    engine: Engine, authenticator: Authenticator, path: str
) -> tuple[ASGIApp, Callable[[], AbstractAsyncContextManager[None]]]:
    """The MCP server as the ASGI app the API server serves at `path` (streamable HTTP,
    stateless, JSON answers), and what it runs within while it serves (`sessions_running`).
    The server answers 401 to a request without a valid key before it reaches this app
    (`wovyr.server.app`); every tool call checks its key again."""
    from mcp.server.streamable_http_manager import StreamableHTTPASGIApp
    from mcp.server.transport_security import TransportSecuritySettings

    def principal_of(ctx: Context[Any, Any]) -> Principal:
        request = ctx.request_context.request
        token = bearer_token(getattr(request, "headers", None))
        principal = authenticator.verify(token) if token else None
        if principal is None:
            raise KeyRefused("an API key is required")
        return principal

    server = build_server(engine, principal_of)
    # Every request is authenticated by key, so the SDK's Host/Origin allow-list (its guard
    # for unauthenticated local servers) is not needed behind the API's own guard.
    server.streamable_http_app(
        streamable_http_path=path,
        stateless_http=True,
        json_response=True,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    manager = server.session_manager
    return StreamableHTTPASGIApp(manager), functools.partial(sessions_running, manager)


@contextlib.asynccontextmanager
async def sessions_running(manager: Any) -> AsyncIterator[None]:
    """The session manager running, in a task of its own: its task group is entered and
    left in that task, whichever task enters and leaves this context."""
    ready, stop = asyncio.Event(), asyncio.Event()

    async def hold() -> None:
        async with manager.run():
            ready.set()
            await stop.wait()

    task = asyncio.create_task(hold())
    waiting = asyncio.create_task(ready.wait())
    await asyncio.wait({task, waiting}, return_when=asyncio.FIRST_COMPLETED)
    if task.done():  # it failed to start: say why
        waiting.cancel()
        task.result()
    try:
        yield
    finally:
        stop.set()
        await task
