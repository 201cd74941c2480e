"""`/api/v1/batches`: bulk actions (cancel, rerun, signal, delete the executions a filter
selects), recorded and run in the background in pages (see `wovyr.engine.bulk`)."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import Query, Response

from wovyr.engine.bulk import Bulk, BulkFilter
from wovyr.platform.auth import Principal
from wovyr.server.api.models import (
    BatchDetail,
    BatchItemOut,
    BatchList,
    BatchOut,
    BatchProgress,
    BatchRequest,
)
from wovyr.server.api.paging import (
    MAX_INDEX,
    Cursor,
    decode_cursor,
    encode_cursor,
    index_at,
    opaque,
)
from wovyr.server.deps import Ctx, Operator, ServerContext, Viewer, tenant_engine
from wovyr.server.guard import api_router
from wovyr.server.problems import LOCATION_HEADER, ApiProblem, located
from wovyr.store.bulk import BatchItem, BatchRecord

__all__ = ["batch_out", "router"]

router = api_router("/api/v1/batches", "batches", 400, 401, 403, 404, 409, 413, 422)


def batch_out(b: BatchRecord) -> BatchOut:
    return BatchOut(
        id=b.id,
        action=b.action,
        status="completed" if b.finished else "running",
        filter=b.filter,
        signal=b.signal,
        created_at=b.created_at,
        created_by=b.created_by,
        updated_at=b.updated_at,
        finished_at=b.finished_at,
        progress=BatchProgress.model_validate(b, from_attributes=True),
    )


def item_out(i: BatchItem) -> BatchItemOut:
    return BatchItemOut.model_validate(i, from_attributes=True)


def _bulk(ctx: ServerContext, principal: Principal) -> Bulk:
    return Bulk(tenant_engine(ctx, principal))


@router.post(
    "",
    status_code=201,
    response_model=BatchOut,
    summary="Submit a bulk action",
    description="Records the batch and answers at once; the server works on it in the "
    "background, in pages. `delete` needs the admin role (and deletes only finished "
    "executions). The same `idempotency_key`, or the same action and filter while that "
    "batch still runs, answers the existing batch with 200 and changes nothing.",
    responses={
        200: {"description": "The batch already existed.", "headers": LOCATION_HEADER},
        201: {"headers": LOCATION_HEADER},
    },
)
def submit_batch(body: BatchRequest, response: Response, ctx: Ctx, principal: Operator) -> BatchOut:
    if body.action == "delete" and not principal.can("admin"):
        raise ApiProblem(
            403, f"A bulk delete needs the admin role; the key's role is {principal.role}."
        )
    created, batch = _bulk(ctx, principal).submit(
        body.action,
        BulkFilter(**dict(body.filter)),
        signal=body.signal,
        payload=body.payload,
        idempotency_key=body.idempotency_key,
    )
    located(response, created, f"{router.prefix}/{batch.id}")
    if created and ctx.background is not None:
        ctx.background.wake_batches()
    return batch_out(batch)


@router.get(
    "",
    response_model=BatchList,
    summary="Batches, newest first",
    description="At most `limit` batches; follow `next_cursor` for older ones.",
)
def list_batches(
    ctx: Ctx,
    principal: Viewer,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    cursor: Cursor = None,
) -> BatchList:
    found = _bulk(ctx, principal).batches(limit + 1, before=decode_cursor(cursor))
    last = found[limit - 1] if len(found) > limit else None
    following = encode_cursor((last.created_at, last.id)) if last else None
    return BatchList(items=[batch_out(b) for b in found[:limit]], next_cursor=following)


@router.get(
    "/{batch_id}", response_model=BatchDetail, summary="One batch: progress and item outcomes"
)
def get_batch(
    batch_id: str,
    ctx: Ctx,
    principal: Viewer,
    after: Annotated[int, Query(ge=0, le=MAX_INDEX, description="Items numbered above it.")] = 0,
    limit: Annotated[int, Query(ge=0, le=1000)] = 100,
    outcome: Literal["pending", "ok", "skipped", "error"] | None = None,
    cursor: Cursor = None,
) -> BatchDetail:
    """A batch's progress and its items' outcomes (`pending`, `ok`, `skipped`, `error`),
    numbered; follow `next_cursor` for more items."""
    after = index_at(cursor, after)
    bulk = _bulk(ctx, principal)
    batch = bulk.get(batch_id)
    items = bulk.items(batch_id, after, limit, outcome) if limit else []
    more = len(items) == limit and limit > 0
    return BatchDetail(
        **batch_out(batch).model_dump(),
        items=[item_out(i) for i in items],
        next_after=items[-1].n if more else None,
        next_cursor=opaque(items[-1].n) if more else None,
    )
