"""`/api/v1/memory/{namespace}`: the caller's tenant's memory namespaces (`docs/memory.md`).

`GET /api/v1/memory/{namespace}` lists live items by key (`prefix`, `after`, `limit`),
`GET .../{key}` reads one and `DELETE .../{key}` deletes one. Everything is scoped by the
API key's tenant: another tenant's namespace answers exactly like a missing one (404: a
namespace without live items is missing; a page after `after` or under `prefix` may be
empty). A delete is audited as the calling key, in its transaction.
Writes and searches are made by workflows and agents (`memory:`
steps and tools), and by `wovyr memory` on the host.
"""

from __future__ import annotations

from typing import Any

from fastapi import Query, Response

from wovyr.activities.memory import NAMESPACE_RULE, is_namespace
from wovyr.engine.memory import TenantMemory
from wovyr.errors import InputError, NotFound, Problem
from wovyr.server.api.paging import Cursor, opaque, position
from wovyr.server.deps import Ctx, Operator, Viewer, tenant_engine
from wovyr.server.guard import api_router

__all__ = ["router"]

router = api_router("/api/v1/memory", "memory", 401, 403, 404, 422)


def _memory(ctx: Ctx, tenant: str) -> TenantMemory:
    return TenantMemory(ctx.engine.store, tenant, ctx.clock)


def _namespace(namespace: str) -> str:
    if not is_namespace(namespace):
        message = f"invalid memory namespace {namespace!r}: {NAMESPACE_RULE}"
        raise InputError([Problem(message, path="namespace")])
    return namespace


def _missing(namespace: str, key: str) -> NotFound:
    return NotFound(f"no item {key!r} in memory namespace {namespace!r}")


@router.get("/{namespace}", summary="The live items of a memory namespace, by key")
def list_items(
    namespace: str,
    ctx: Ctx,
    principal: Viewer,
    prefix: str = Query("", description="Keys starting with it"),
    after: str = Query("", description="Keys after it (the `next` of the page before)"),
    limit: int = Query(100, ge=1, le=1000),
    cursor: Cursor = None,
) -> dict[str, Any]:
    """The live items of an agents' memory namespace, by key (`prefix` narrows); follow
    `next_cursor`."""
    after = position(cursor, str) or after
    items = _memory(ctx, principal.tenant).list_items(_namespace(namespace), prefix, after, limit)
    if not items and not prefix and not after:  # no live item: no such namespace
        raise NotFound(f"no memory namespace {namespace!r}")
    following = items[-1]["key"] if len(items) == limit else None
    return {"items": items, "next": following, "next_cursor": opaque(following)}


@router.get("/{namespace}/{key}", summary="One item of a memory namespace")
def get_item(namespace: str, key: str, ctx: Ctx, principal: Viewer) -> dict[str, Any]:
    """One item: key, value, text, version, updated and expiry times."""
    item = _memory(ctx, principal.tenant).get(_namespace(namespace), key)
    if item is None:
        raise _missing(namespace, key)
    return item


@router.delete("/{namespace}/{key}", status_code=204, summary="Delete an item")
def delete_item(namespace: str, key: str, ctx: Ctx, principal: Operator) -> Response:
    """Delete an item (204); audited."""
    engine = tenant_engine(ctx, principal)
    audit = engine.audit_entry("memory.delete", f"{_namespace(namespace)}/{key}")
    done = _memory(ctx, principal.tenant).delete(namespace, key, None, audit=audit)
    if not done["deleted"]:
        raise _missing(namespace, key)
    return Response(status_code=204)
