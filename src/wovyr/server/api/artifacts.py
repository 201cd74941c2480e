"""Artifacts over HTTP (`wovyr.engine.artifacts`): bytes a tenant stores once by content
hash and steps reference by digest (`{type: image, artifact: "sha256:..."}`).

- `POST /api/v1/artifacts` (operator): the raw body, its Content-Type one a content part
  takes (PNG, JPEG, GIF, WebP, PDF: else 415), at most `MAX_ARTIFACT_BYTES` (413): 201 with
  `{digest, media_type, size, ref}` when stored now, 200 when the tenant had those bytes.
  The first put counts against the tenant's `stored_bytes_per_day` quota (429 past it).
- `GET /api/v1/artifacts/{digest}` (viewer): the bytes, with their media type.
- `GET /api/v1/artifacts` (viewer): the tenant's artifacts, newest first, one cursor page
  at a time.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request, Response
from pydantic import BaseModel
from starlette.concurrency import run_in_threadpool

from wovyr.engine.artifacts import (
    MAX_ARTIFACT_BYTES,
    ArtifactTooLarge,
    UnsupportedMediaType,
    artifact_view,
    list_artifacts,
    media_type_of,
    put_artifact,
    read_artifact,
)
from wovyr.server.api.paging import Cursor, decode_cursor, encode_cursor
from wovyr.server.deps import Ctx, Operator, Viewer, tenant_engine
from wovyr.server.problems import LOCATION_HEADER, ApiProblem, located, problem_responses
from wovyr.store.artifacts import ARTIFACT_TYPES

__all__ = ["router"]

router = APIRouter(tags=["artifacts"], responses=problem_responses(401, 403, 404))

_BINARY = {"schema": {"type": "string", "format": "binary"}}
_ARTIFACT_BODY: dict[str, Any] = {
    "requestBody": {"required": True, "content": dict.fromkeys(ARTIFACT_TYPES, _BINARY)}
}
Digest = Annotated[str, Path(max_length=100, description="`sha256:<hex>`")]


class ArtifactRef(BaseModel):
    type: str  # image or file
    artifact: str
    filename: str | None = None


class ArtifactOut(BaseModel):
    digest: str
    media_type: str
    size: int
    ref: ArtifactRef  # the content part that sends it to a model
    created_at: str
    created_by: str


class ArtifactPage(BaseModel):
    items: list[ArtifactOut]
    next_cursor: str | None


@router.post(
    "/api/v1/artifacts",
    status_code=201,
    response_model=ArtifactOut,
    response_model_exclude_none=True,
    summary="Store an artifact (the raw bytes)",
    description="Stores the body under its digest (`sha256:<hex>`): 201 stored now, 200 "
    f"when the tenant had the same bytes. The Content-Type is one of {', '.join(ARTIFACT_TYPES)}"
    f" (415 otherwise); at most {MAX_ARTIFACT_BYTES} bytes (413). `ref` is the content part "
    "that sends it to a model (an `llm` message's content, an agent's attachments).",
    responses={
        200: {"description": "The tenant had the same bytes already."},
        201: {"headers": LOCATION_HEADER},
        **problem_responses(413, 415, 422, 429),
    },
    openapi_extra=_ARTIFACT_BODY,
)
async def put_artifact_bytes(
    request: Request, response: Response, ctx: Ctx, principal: Operator
) -> ArtifactOut:
    """Store the request body as an artifact."""
    try:
        media_type = media_type_of(request.headers.get("content-type", ""))
    except UnsupportedMediaType as exc:
        raise ApiProblem(415, f"Send an artifact as one of {', '.join(ARTIFACT_TYPES)}.") from exc
    data = await request.body()
    engine = tenant_engine(ctx, principal)
    try:
        record, created = await run_in_threadpool(put_artifact, engine, data, media_type)
    except ArtifactTooLarge as exc:
        raise ApiProblem(413, exc.message) from None
    located(response, created, f"/api/v1/artifacts/{record.digest}")
    return ArtifactOut(**artifact_view(record))


@router.get(
    "/api/v1/artifacts",
    response_model=ArtifactPage,
    summary="The artifacts",
    description="The tenant's artifacts, newest first (never their bytes). `cursor` in, "
    "`next_cursor` out.",
    responses=problem_responses(400),
)
def list_stored_artifacts(
    ctx: Ctx,
    principal: Viewer,
    cursor: Cursor = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
) -> ArtifactPage:
    """A page of the artifacts."""
    engine = tenant_engine(ctx, principal)
    items, after = list_artifacts(engine, before=decode_cursor(cursor), limit=limit)
    return ArtifactPage(
        items=[ArtifactOut(**artifact_view(r)) for r in items], next_cursor=encode_cursor(after)
    )


@router.get(
    "/api/v1/artifacts/{digest}",
    summary="An artifact's bytes",
    description="The artifact's bytes, with its media type as the Content-Type.",
    response_class=Response,
    responses={200: {"content": dict.fromkeys(ARTIFACT_TYPES, _BINARY)}},
)
def get_artifact_bytes(ctx: Ctx, principal: Viewer, digest: Digest) -> Response:
    """The bytes of an artifact."""
    engine = tenant_engine(ctx, principal)
    record, data = read_artifact(engine, digest)
    # a download, never a page of this origin: a PDF opened from here runs nothing of it
    headers = {
        "Content-Disposition": f'attachment; filename="{record.digest.replace(":", "-")}"',
        "Content-Security-Policy": "sandbox",
    }
    return Response(data, media_type=record.media_type, headers=headers)
