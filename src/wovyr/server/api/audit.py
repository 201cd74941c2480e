"""`/api/v1/audit`: a tenant's admin reads its own tenant's audit records.

Only the caller's tenant's records are listed; another tenant's never are, and a viewer or
operator key gets 403. Verifying the chain is not offered here: records of every tenant are
links of ONE chain (each record's `prev_hash` is the hash of the record before it, whoever's
it is), so checking it needs every tenant's records: `wovyr admin audit verify`, on the
host. For the same reason a record is shown without its `prev_hash` (the hash of another
tenant's record); its `seq` is the chain's, so gaps between a tenant's seqs are other
tenants' records (the host's volume of changes shows, nothing about them).
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import Query
from pydantic import BaseModel

from wovyr.server.api.paging import MAX_INDEX, Cursor, index_at, opaque
from wovyr.server.deps import Admin, Ctx
from wovyr.server.guard import api_router

__all__ = ["router"]

router = api_router("/api/v1/audit", "admin", 401, 403, 422)


class AuditOut(BaseModel):
    seq: int
    at: datetime
    tenant: str
    actor: str  # `key:<id>/<role>` (an API key) or `local:<user>` (the host's CLI)
    action: str
    target: str
    details: dict[str, Any]  # hashes of payloads, never payloads
    hash: str


class AuditPage(BaseModel):
    items: list[AuditOut]
    next_after: int | None  # pass as `after` for the next page; None: no more
    next_cursor: str | None  # the same, as `cursor`


@router.get("", response_model=AuditPage, summary="The tenant's audit records, oldest first")
def list_audit(
    ctx: Ctx,
    principal: Admin,
    after: Annotated[int, Query(ge=0, le=MAX_INDEX, description="Records after this seq.")] = 0,
    since: Annotated[datetime | None, Query(description="Records at or after this time.")] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    cursor: Cursor = None,
) -> AuditPage:
    """The tenant's audit records, oldest first: who (`key:<id>/<role>`), what, on which
    target, with hashes of payloads (never payloads). Follow `next_cursor`."""
    after = index_at(cursor, after)
    records = ctx.engine.store.audit_records(
        after_seq=after, limit=limit + 1, tenant=principal.tenant, since=since
    )
    more = len(records) > limit
    items = [AuditOut.model_validate(r, from_attributes=True) for r in records[:limit]]
    following = items[-1].seq if more else None
    return AuditPage(items=items, next_after=following, next_cursor=opaque(following))
