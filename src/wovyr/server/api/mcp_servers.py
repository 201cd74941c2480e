"""`/api/v1/mcp-servers`: an admin adds, lists, shows and removes its own tenant's MCP
servers (`mcp:` steps and an agent's `mcp:NAME/TOOL` tools call them).

A server is `{"command": [...]}` (stdio: a process on the host, refused with 422 unless the
tenant's side-effect policy lets steps run programs) or `{"url": ..., "header_secrets":
{HEADER: SECRET_NAME}}` (streamable HTTP; the secrets' NAMES are stored and shown, never a
value). Another tenant's server answers exactly like a missing one (404). Every change is
audited as made by the calling key, in the transaction of the change.
"""

from __future__ import annotations

from typing import Any

from fastapi import Body, Response
from pydantic import BaseModel

from wovyr.platform.mcp import (
    McpServerInfo,
    add_mcp_server,
    audit_details,
    list_mcp_servers,
    mcp_server_info,
    parse_mcp_server,
    remove_mcp_server,
)
from wovyr.server.deps import Admin, Ctx, tenant_engine
from wovyr.server.guard import api_router

__all__ = ["router"]

router = api_router("/api/v1/mcp-servers", "admin", 401, 403, 404, 413, 422)


class McpServerOut(BaseModel):
    name: str
    transport: str  # stdio or http
    command: list[str] | None
    url: str | None
    header_secrets: dict[str, str]  # header -> the secret's NAME, never its value
    updated_at: str
    updated_by: str


def _out(info: McpServerInfo) -> McpServerOut:
    return McpServerOut(**info.to_dict())


@router.get("", response_model=list[McpServerOut], summary="The tenant's MCP servers")
def get_mcp_servers(ctx: Ctx, principal: Admin) -> list[McpServerOut]:
    """The tenant's MCP servers (a command or a URL; headers by secret name)."""
    return [_out(i) for i in list_mcp_servers(ctx.engine.store, principal.tenant)]


@router.get("/{name}", response_model=McpServerOut, summary="An MCP server")
def get_mcp_server(name: str, ctx: Ctx, principal: Admin) -> McpServerOut:
    """One MCP server of the tenant."""
    return _out(mcp_server_info(ctx.engine.store, principal.tenant, name))


@router.put("/{name}", response_model=McpServerOut, summary="Add or replace an MCP server")
def put_mcp_server(
    name: str,
    ctx: Ctx,
    principal: Admin,
    body: dict[str, Any] = Body(  # noqa: B008 - FastAPI's way to take the whole body
        description="command (a stdio server: a list, or text split like a shell) or url "
        "(streamable HTTP), and header_secrets ({HEADER: SECRET_NAME}) with a url",
        examples=[
            {"url": "https://mcp.example.com/mcp", "header_secrets": {"Authorization": "TOKEN"}}
        ],
    ),
) -> McpServerOut:
    """Add or replace an MCP server (`command`, or `url` and `header_secrets`); a stdio
    server is a 422 unless the tenant's policy allows programs. Audited."""
    engine = tenant_engine(ctx, principal)
    record = parse_mcp_server(
        principal.tenant,
        name,
        body,
        policy=engine.side_effect_policy(),
        by=principal.key_id,
        at=ctx.clock.now(),
    )
    info = McpServerInfo.of(record)
    audit = engine.audit_entry("mcp.add", name, audit_details(info))
    add_mcp_server(engine.store, record, audit=audit)
    return _out(info)


@router.delete("/{name}", status_code=204, summary="Remove an MCP server")
def delete_mcp_server(name: str, ctx: Ctx, principal: Admin) -> Response:
    """Remove an MCP server of the tenant (204). Audited."""
    engine = tenant_engine(ctx, principal)
    audit = engine.audit_entry("mcp.remove", name)
    remove_mcp_server(engine.store, principal.tenant, name, audit=audit)
    return Response(status_code=204)
