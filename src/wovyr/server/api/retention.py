"""`/api/v1/admin/retention`: how many days the tenant's finished executions are kept, as
its admin reads and sets them (`wovyr.engine.retention`).

`PUT` replaces the tenant's days and per-workflow days (the most specific wins; `days:
null` and no workflows keep everything). `export_to`, a folder on the server host, is the
host administrator's alone (`wovyr admin retention set TENANT --export-to DIR`): a body
that names it is refused with 403, a folder set on the host is kept by a `PUT`, and the
answer says only whether purged executions are exported (`export`), never where.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from fastapi import Body
from pydantic import BaseModel

from wovyr.engine.retention import Retention, parse_retention
from wovyr.server.deps import Admin, Ctx, tenant_engine
from wovyr.server.guard import api_router
from wovyr.server.problems import ApiProblem

__all__ = ["router"]

router = api_router("/api/v1/admin/retention", "admin", 401, 403, 413, 422)


class RetentionOut(BaseModel):
    tenant: str
    days: int | None  # None: finished executions are kept
    workflows: dict[str, int]  # a workflow's own days (they win over `days`)
    export: bool  # purged executions are exported first (to a folder the host chose)


def _out(tenant: str, settings: Retention) -> RetentionOut:
    return RetentionOut(
        tenant=tenant,
        days=settings.days,
        workflows=dict(settings.workflows),
        export=settings.export_to is not None,
    )


@router.get("", response_model=RetentionOut, summary="The tenant's retention")
def get_retention(ctx: Ctx, principal: Admin) -> RetentionOut:
    """How many days the tenant's finished executions are kept, overall and per workflow."""
    return _out(principal.tenant, ctx.engine.for_tenant(principal.tenant).retention())


@router.put("", response_model=RetentionOut, summary="Set the tenant's retention")
def put_retention(
    ctx: Ctx,
    principal: Admin,
    fields: dict[str, Any] = Body(  # noqa: B008 - FastAPI's way to take the whole body
        description="`days` (1-36500, or null: keep) and `workflows` (name -> days).",
        examples=[{"days": 90, "workflows": {"nightly-report": 7}}],
    ),
) -> RetentionOut:
    """Replace the tenant's retention: `days` (null: keep everything) and per-workflow days
    (the most specific wins)."""
    if "export_to" in fields:
        raise ApiProblem(
            403,
            "export_to is a folder on the server host: it is set there, "
            f"`wovyr admin retention set {principal.tenant} --export-to DIR`.",
        )
    proposed = parse_retention({"days": fields.get("days"), "workflows": fields.get("workflows")})
    unknown = set(fields) - {"days", "workflows"}
    if unknown:
        parse_retention(fields)  # names every unknown field (422)
    engine = tenant_engine(ctx, principal)
    current = engine.retention()
    stored = engine.set_retention(
        replace(proposed, export_to=current.export_to), by=principal.key_id
    )
    return _out(principal.tenant, stored)
