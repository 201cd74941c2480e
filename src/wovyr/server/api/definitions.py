"""`/api/v1/definitions`: the tenant's definition registry (apply, list, show).

`POST` takes the workflow document itself: YAML text (`Content-Type: application/yaml`,
`text/yaml` or `text/plain`) or a JSON object (`application/json`), and registers it under
its `metadata.name` and `metadata.version` in the caller's tenant (201 applied, 200
unchanged, 409 when that name and version hold different content). It is checked like any
accepted definition: the document (422 with located problems) and the tenant's side-effect
policy. Start-by-name and child workflows resolve in the caller's tenant only.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from fastapi import Request, Response
from pydantic import BaseModel
from starlette.concurrency import run_in_threadpool

from wovyr.errors import NotFound
from wovyr.server.api.documents import DOCUMENT_BODY, read_document
from wovyr.server.api.etags import ETAG_HEADER, PRECONDITION, TAGGED, IfMatch, check_if_match
from wovyr.server.deps import Ctx, Operator, Viewer, tenant_engine
from wovyr.server.guard import api_router
from wovyr.server.problems import LOCATION_HEADER, located, problem_responses
from wovyr.store.records import DefinitionRecord

__all__ = ["router"]

router = api_router("/api/v1/definitions", "definitions", 401, 403, 404, 413, 422, strict=False)


class DefinitionOut(BaseModel):
    name: str
    version: str
    hash: str
    applied_at: datetime


class DefinitionApplied(DefinitionOut):
    result: str  # "applied" or "unchanged"


class DefinitionDetail(DefinitionOut):
    definition: dict[str, Any]


def _out(record: DefinitionRecord) -> DefinitionOut:
    return DefinitionOut(
        name=record.name, version=record.version, hash=record.hash, applied_at=record.created_at
    )


@router.post(
    "",
    status_code=201,
    response_model=DefinitionApplied,
    summary="Apply a definition (YAML or JSON body)",
    description="Registers the document under its `metadata.name` and `metadata.version`: "
    "201 applied, 200 unchanged, 409 when that name and version hold other content. With "
    "`If-Match` (the `ETag` of the name's latest version, as `GET /{name}` gave it), a 412 "
    "when another version was applied since.",
    responses={
        200: {"description": "Already applied with the same content.", "headers": ETAG_HEADER},
        201: {"headers": {**LOCATION_HEADER, **ETAG_HEADER}},
        **problem_responses(409, 415),
        **PRECONDITION,
    },
    openapi_extra=DOCUMENT_BODY,
)
async def apply_definition(
    request: Request,
    response: Response,
    ctx: Ctx,
    principal: Operator,
    if_match: IfMatch = None,
) -> DefinitionApplied:
    text = await read_document(request, "workflow")
    engine = tenant_engine(ctx, principal)
    if if_match is not None:
        # parsing and validating an untrusted document is CPU work: never on the event loop
        named, _ = await run_in_threadpool(engine.resolve, text)
        latest = engine.store.registered_definition(named.name, None, engine.tenant)
        check_if_match(if_match, _etag(latest) if latest else None)
    # parsing and validating an untrusted document is CPU work: never on the event loop
    outcome, digest = await run_in_threadpool(engine.apply, text)
    workflow = engine.definition(digest)
    record = engine.store.registered_definition(workflow.name, workflow.version, engine.tenant)
    assert record is not None  # just applied
    located(response, outcome == "applied", f"{router.prefix}/{record.name}/{record.version}")
    response.headers["ETag"] = _etag(record)
    return DefinitionApplied(**_out(record).model_dump(), result=outcome)


def _etag(record: DefinitionRecord) -> str:
    """A version's tag: its content hash (a version never changes; the name's latest does)."""
    return f'"{record.hash}"'


@router.get(
    "",
    response_model=list[DefinitionOut],
    summary="The tenant's definitions",
    description="Every applied version of every name: `name`, `version`, `hash`, `applied_at`.",
)
def list_definitions(ctx: Ctx, principal: Viewer) -> list[DefinitionOut]:
    engine = tenant_engine(ctx, principal)
    return [_out(r) for r in engine.store.list_registered(engine.tenant)]


@router.get(
    "/{name}",
    response_model=DefinitionDetail,
    summary="A definition's latest applied version",
    description="The document as registered, with its `ETag` (its hash): send it as "
    "`If-Match` when applying the next version.",
    responses=TAGGED,
)
def latest_definition(
    name: str, response: Response, ctx: Ctx, principal: Viewer
) -> DefinitionDetail:
    return _detail(ctx, principal, response, name, None)


@router.get(
    "/{name}/{version}",
    response_model=DefinitionDetail,
    summary="One version",
    description="The document of that version as registered, with its `ETag` (its hash).",
    responses=TAGGED,
)
def one_definition(
    name: str, version: str, response: Response, ctx: Ctx, principal: Viewer
) -> DefinitionDetail:
    return _detail(ctx, principal, response, name, version)


def _detail(
    ctx: Ctx, principal: Viewer, response: Response, name: str, version: str | None
) -> DefinitionDetail:
    engine = tenant_engine(ctx, principal)
    record = engine.store.registered_definition(name, version, engine.tenant)
    if record is None:
        raise NotFound(f"definition {name!r} not found")
    response.headers["ETag"] = _etag(record)
    workflow = engine.definition(record.hash, engine.tenant)
    data = workflow.model_dump(by_alias=True, mode="json", exclude_defaults=True)
    return DefinitionDetail(**_out(record).model_dump(), definition=data)
