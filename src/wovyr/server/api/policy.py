"""`/api/v1/admin/policy`: a tenant's side-effect policy, as its admin sees and tightens it.

An admin reads the policy its tenant's `shell` and `http` steps run under, and may tighten
it (turn shell off, add limits, drop allow-list entries). Opening a tenant up is refused
with 403: an API key must never buy more of the host than its owner granted, so widening
is done on the server host (`wovyr admin tenants set TENANT ...`), by whoever holds the
store. A tightened policy applies to the next attempt of every execution of the tenant.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from fastapi import Body, Response
from pydantic import BaseModel

from wovyr.activities.policy import SideEffectPolicy, parse_policy, widened
from wovyr.engine.tenants import TenantPolicy, policy_of, set_policy
from wovyr.server.api.etags import PRECONDITION, TAGGED, IfMatch, check_unchanged, tag
from wovyr.server.deps import Admin, Ctx
from wovyr.server.guard import api_router
from wovyr.server.problems import ApiProblem

__all__ = ["router"]

router = api_router("/api/v1/admin/policy", "admin", 401, 403, 413, 422)


class PolicyOut(BaseModel):
    tenant: str
    source: str  # "default" (the tenant's default) or "set"
    policy: SideEffectPolicy
    updated_at: datetime | None
    updated_by: str | None


def _out(found: TenantPolicy) -> PolicyOut:
    stored = found.stored if found.source == "set" else None
    return PolicyOut(
        tenant=found.tenant,
        source=found.source,
        policy=found.policy,
        updated_at=stored.updated_at if stored else None,
        updated_by=stored.updated_by if stored else None,
    )


@router.get(
    "",
    response_model=PolicyOut,
    summary="The tenant's side-effect policy",
    description="What its `shell` and `http` steps, providers and MCP servers may reach, "
    "with its `ETag` (send it as `If-Match` with a change).",
    responses=TAGGED,
)
def get_policy(response: Response, ctx: Ctx, principal: Admin) -> PolicyOut:
    return tag(response, _out(policy_of(ctx.engine.store, principal.tenant)))


@router.patch(
    "",
    response_model=PolicyOut,
    summary="Tighten the tenant's side-effect policy",
    description="The fields given change, each allowing no more than now (widening is a "
    "403: it is done on the server host). With `If-Match`, a 412 when the policy changed "
    "since that ETag.",
    responses={**TAGGED, **PRECONDITION},
)
def tighten_policy(
    response: Response,
    ctx: Ctx,
    principal: Admin,
    if_match: IfMatch = None,
    fields: dict[str, Any] = Body(  # noqa: B008 - FastAPI's way to take the whole body
        description="Policy fields to change (the others keep their value); each change must "
        "allow no more than the policy does now.",
        examples=[{"shell": False, "shell_cpu_seconds": 10}],
    ),
) -> PolicyOut:
    store = ctx.engine.store
    found = policy_of(store, principal.tenant)
    check_unchanged(if_match, _out(found))
    current = found.policy
    proposed = parse_policy(fields, base=current)
    wider = widened(proposed, current)
    if wider:
        raise ApiProblem(
            403,
            f"This would widen {', '.join(wider)}: over the API a policy can only be "
            "tightened. Opening a tenant up is done on the server host: "
            f"`wovyr admin tenants set {principal.tenant} ...`.",
        )
    found = set_policy(
        store,
        principal.tenant,
        proposed,
        by=principal.key_id,
        at=ctx.clock.now(),
        actor=principal.audit_actor,
    )
    return tag(response, _out(found))
