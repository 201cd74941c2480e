"""`/api/v1/admin/limits`: a tenant's rate-limit buckets, as its admin sees and declares
them (what `wovyr admin limits` does on the host).

A declared bucket is one an activity names by key (`rate_limit: {key: openai}`): its
numbers win over the activity's own. The list also shows the buckets activities made with
their own numbers (`declared: false`). Every change is audited as made by the caller's key,
in the same transaction. A bucket throttles the tenant's own calls, so an admin may set any
numbers (unlike quotas, which only go down over the API). Another tenant's bucket of the
same name is another bucket: it answers 404 like a missing one.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Path, Response
from pydantic import BaseModel, ConfigDict, Field

from wovyr.errors import NotFound
from wovyr.server.deps import Admin, Ctx, tenant_engine
from wovyr.server.guard import api_router
from wovyr.server.problems import problem_responses
from wovyr.store.flow import RateLimitRecord

__all__ = ["LimitOut", "limit_out", "router"]

router = api_router("/api/v1/admin/limits", "admin", 401, 403, 413, 422)

KeyPath = Annotated[str, Path(min_length=1, max_length=200, description="The bucket's key.")]


class LimitIn(BaseModel):
    model_config = ConfigDict(json_schema_extra={"examples": [{"limit": 500, "per": 60}]})

    limit: float = Field(gt=0, description="Units per `per` seconds.")
    per: float = Field(default=1.0, gt=0, description="The period of `limit`, in seconds.")
    burst: float | None = Field(default=None, gt=0, description="Units at once (default `limit`).")


class LimitOut(BaseModel):
    key: str
    per_second: float  # the refill rate
    burst: float  # what the bucket holds at most
    tokens: float  # units in the bucket as of its last use (it refills meanwhile)
    declared: bool  # by an admin (False: made by an activity with its own numbers)
    updated_by: str | None


def limit_out(record: RateLimitRecord) -> LimitOut:
    return LimitOut(
        key=record.key,
        per_second=record.per_second,
        burst=record.capacity,
        tokens=round(record.tokens, 3),
        declared=record.declared,
        updated_by=record.updated_by or None,
    )


@router.get("", response_model=list[LimitOut], summary="The tenant's rate-limit buckets")
def list_limits(ctx: Ctx, principal: Admin) -> list[LimitOut]:
    """The tenant's rate-limit buckets: the declared ones and those its activities made."""
    return [limit_out(r) for r in ctx.engine.for_tenant(principal.tenant).rate_limits()]


@router.get(
    "/{key}",
    response_model=LimitOut,
    summary="One rate-limit bucket of the tenant",
    responses=problem_responses(404),
)
def get_limit(key: KeyPath, ctx: Ctx, principal: Admin) -> LimitOut:
    """One bucket: its refill rate, its burst and the units in it as of its last use."""
    for record in ctx.engine.for_tenant(principal.tenant).rate_limits():
        if record.key == key:
            return limit_out(record)
    raise NotFound(f"rate limit {key} not found")  # THE 404, as for another tenant's


@router.put("/{key}", response_model=LimitOut, summary="Declare (or change) a bucket")
def put_limit(key: KeyPath, body: LimitIn, ctx: Ctx, principal: Admin) -> LimitOut:
    """Declare a bucket (`limit` units per `per` seconds, `burst` at once) or change one;
    audited."""
    engine = tenant_engine(ctx, principal)
    record = engine.set_rate_limit(key, body.limit, body.per, body.burst, by=principal.key_id)
    return limit_out(record)


@router.delete(
    "/{key}",
    status_code=204,
    summary="Delete a bucket (an activity naming it makes it again with its own numbers)",
    responses=problem_responses(404),
)
def delete_limit(key: KeyPath, ctx: Ctx, principal: Admin) -> Response:
    """Remove a declared bucket; audited. A 404 when there is none."""
    tenant_engine(ctx, principal).delete_rate_limit(key)  # NotFound answers 404
    return Response(status_code=204)
