"""`/api/v1/flow`: what flow control holds for the caller's tenant now: its concurrency keys
in use (workflow keys: executions holding a slot and waiting for one; activity keys:
attempts running with a slot and waiting for one) and its rate-limit buckets. Read-only
(viewer); the buckets are declared over `/api/v1/admin/limits`."""

from __future__ import annotations

from pydantic import BaseModel

from wovyr.server.api.limits import LimitOut, limit_out
from wovyr.server.deps import Ctx, Viewer
from wovyr.server.guard import api_router

__all__ = ["router"]

router = api_router("/api/v1/flow", "workflows", 401, 403)


class FlowKeyOut(BaseModel):
    kind: str  # `workflow` or `activity`
    key: str
    running: int
    waiting: int


class FlowOut(BaseModel):
    keys: list[FlowKeyOut]
    buckets: list[LimitOut]


@router.get("", response_model=FlowOut, summary="The tenant's concurrency keys and buckets")
def flow_state(ctx: Ctx, principal: Viewer) -> FlowOut:
    """The tenant's concurrency keys (how many run, how many wait) and rate-limit buckets,
    as the workers see them now."""
    engine = ctx.engine.for_tenant(principal.tenant)
    keys = [FlowKeyOut(kind=k.kind, key=k.key, running=k.running, waiting=k.waiting)
            for k in engine.flow_keys()]  # fmt: skip
    return FlowOut(keys=keys, buckets=[limit_out(r) for r in engine.rate_limits()])
