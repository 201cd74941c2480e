"""`/api/v1/admin/quotas`: a tenant's quotas and what it used today, as its admin sees and
lowers them.

An admin reads its tenant's quotas (`wovyr.engine.quotas`) with today's (UTC) usage, and
may lower them or set a limit where none was. Raising or removing a limit is refused with
403: a tenant must not buy itself more of the server than its host granted, so that is
done on the server host (`wovyr admin quotas set TENANT ...`). A lowered quota applies to
the next start. The fair-share `weight` counts as a limit too: over the API it may only
go down from the stored weight (from 1, the default, when none is stored); `max_slots`
and `max_running` may be set or lowered. Workers read them within seconds.
"""

from __future__ import annotations

from typing import Any

from fastapi import Body
from pydantic import BaseModel

from wovyr.engine.quotas import QUOTA_NAMES, parse_quotas
from wovyr.server.deps import Admin, Ctx, tenant_engine
from wovyr.server.guard import api_router
from wovyr.server.problems import ApiProblem

__all__ = ["router"]

router = api_router("/api/v1/admin/quotas", "admin", 401, 403, 413, 422)


_BODY = (
    f"Quotas to change (the others keep their value): {', '.join(QUOTA_NAMES)}; each may "
    "only be lowered (or set where none is)."
)


class QuotasOut(BaseModel):
    tenant: str
    day: str  # the UTC day `used` counts
    quotas: dict[str, float | None]  # every quota; None: no limit
    used: dict[str, float]  # today's use of each daily budget (executions, activity_seconds)
    running: int  # the tenant's executions running now


@router.get("", response_model=QuotasOut, summary="The tenant's quotas and today's usage")
def get_quotas(ctx: Ctx, principal: Admin) -> QuotasOut:
    """The tenant's quotas (executions a day, concurrent executions, schedules, model
    tokens and cost a day, ...), today's use of each daily budget and what runs now."""
    return QuotasOut(**ctx.engine.for_tenant(principal.tenant).quota_usage())


@router.patch("", response_model=QuotasOut, summary="Lower the tenant's quotas")
def lower_quotas(
    ctx: Ctx,
    principal: Admin,
    fields: dict[str, Any] = Body(  # noqa: B008 - FastAPI's way to take the whole body
        description=_BODY,
        examples=[{"executions_per_day": 1000, "concurrent_executions": 10}],
    ),
) -> QuotasOut:
    """Lower quotas (the fields given): over the API a quota may only get tighter; raising
    one is done on the server host."""
    engine = tenant_engine(ctx, principal)
    current = engine.quotas()
    proposed = parse_quotas({**current.to_dict(), **fields})
    raised = current.raises(proposed)
    if raised:
        raise ApiProblem(
            403,
            f"This would raise {', '.join(raised)}: over the API a quota can only be "
            "lowered. Raising one is done on the server host: "
            f"`wovyr admin quotas set {principal.tenant} ...`.",
        )
    engine.set_quotas(proposed, by=principal.key_id)
    return QuotasOut(**engine.quota_usage())
