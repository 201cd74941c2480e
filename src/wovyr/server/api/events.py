"""Event triggers over HTTP (`wovyr.engine.triggers`).

- `/api/v1/triggers`: the tenant's `kind: Trigger` documents (`POST` a YAML or JSON document,
  operator: 201 applied, 200 unchanged, 422 with located problems; list, show, delete).
- `POST /api/v1/events/{topic}` (operator): a JSON event for the triggers of `topic` (202
  with what each made of it; 413 too large, 400 not JSON, 404 no trigger, 429 limited: each
  recorded all the same).
- `POST /api/v1/hooks/{hook_id}` (no API key): a trigger's inbound webhook, verified by its
  HMAC signature (`Wovyr-Signature: t=<unix seconds>,v1=<hex>`); a wrong, expired or
  replayed signature is 401 and starts nothing.
- `GET /api/v1/events` (viewer): the events received, newest first, one cursor page at a
  time.
- `/api/v1/webhooks` (admin): the tenant's outbound webhook endpoints
  (`wovyr.platform.webhooks`: a URL, the execution events, a filter, the NAMES of the secrets
  deliveries are signed with); `GET /api/v1/deliveries[/{id}]` (viewer): the outbox, newest
  first, each delivery with its attempts.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Query, Request, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from starlette.concurrency import run_in_threadpool

from wovyr.engine.triggers import (
    SIGNATURE_HEADER,
    Received,
    SignatureRefused,
    apply_trigger,
    delete_trigger,
    event_view,
    list_events,
    list_triggers,
    named_trigger,
    receive_event,
    receive_webhook,
    trigger_view,
)
from wovyr.errors import NotFound
from wovyr.platform.webhooks import delivery_view, endpoint_view, parse_endpoint
from wovyr.server.api.documents import APPLIED, DOCUMENT_BODY, read_document
from wovyr.server.api.paging import Cursor, decode_cursor, encode_cursor
from wovyr.server.deps import Admin, Ctx, Operator, Viewer, tenant_engine
from wovyr.server.problems import ApiProblem, located, problem_responses

__all__ = ["router"]

router = APIRouter(tags=["events"], responses=problem_responses(401, 403, 404, 413, 422))

_EVENT_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {"application/json": {"schema": {}, "example": {"order": 42, "total": 120}}},
    }
}


class TriggerOut(BaseModel):
    name: str
    topic: str
    webhook_path: str | None  # POST here, signed; None: the trigger has no webhook
    document: dict[str, Any]  # the applied document (secrets by NAME only)
    updated_at: str
    updated_by: str


class TriggerApplied(TriggerOut):
    result: str  # "applied" or "unchanged"


class ReceivedEvent(BaseModel):
    id: str
    received_at: str
    source: str  # api or webhook
    topic: str
    trigger: str | None
    outcome: str  # started, signalled, duplicate, filtered, rejected, limited, failed, unmatched
    reason: str
    execution_id: str | None
    dedup_key: str | None
    size: int


class ReceivedEvents(BaseModel):
    events: list[ReceivedEvent]


class ReceivedEventPage(BaseModel):
    items: list[ReceivedEvent]
    next_cursor: str | None


@router.post(
    "/api/v1/triggers",
    status_code=201,
    response_model=TriggerApplied,
    summary="Apply a trigger (YAML or JSON body)",
    description="Registers a `kind: Trigger` document under its `metadata.name`, replacing "
    "the trigger of that name: 201 applied, 200 unchanged. A trigger with `webhook` keeps "
    "its webhook URL (`webhook_path`) across applies.",
    responses={**APPLIED, **problem_responses(415)},
    openapi_extra=DOCUMENT_BODY,
)
async def apply_trigger_document(
    request: Request, response: Response, ctx: Ctx, principal: Operator
) -> TriggerApplied:
    """Register a trigger document; its expressions are checked at once."""
    text = await read_document(request, "trigger")
    engine = tenant_engine(ctx, principal)
    outcome, record = await run_in_threadpool(apply_trigger, engine, text)
    located(response, outcome == "applied", f"/api/v1/triggers/{record.name}")
    return TriggerApplied(**trigger_view(record), result=outcome)


@router.get("/api/v1/triggers", response_model=list[TriggerOut], summary="The tenant's triggers")
def list_trigger_documents(ctx: Ctx, principal: Viewer) -> list[TriggerOut]:
    """The tenant's triggers, by name."""
    return [TriggerOut(**trigger_view(r)) for r in list_triggers(tenant_engine(ctx, principal))]


@router.get("/api/v1/triggers/{name}", response_model=TriggerOut, summary="A trigger")
def get_trigger(name: str, ctx: Ctx, principal: Viewer) -> TriggerOut:
    """One trigger of the tenant, with its webhook path."""
    return TriggerOut(**trigger_view(named_trigger(tenant_engine(ctx, principal), name)))


@router.delete("/api/v1/triggers/{name}", status_code=204, summary="Delete a trigger")
def delete_trigger_document(name: str, ctx: Ctx, principal: Operator) -> Response:
    """Delete a trigger (its webhook URL answers 401 from now on). Audited."""
    delete_trigger(tenant_engine(ctx, principal), name)
    return Response(status_code=204)


def _answer(received: Received) -> JSONResponse:
    if received.status == 404:  # recorded; answered as THE 404 (another tenant's topic too)
        raise NotFound("no trigger takes this topic")
    return JSONResponse(received.to_dict(), status_code=received.status)


_RECEIVED = {
    202: {"model": ReceivedEvents, "description": "What each trigger made of the event."},
    **problem_responses(400, 429),
}


@router.post(
    "/api/v1/events/{topic}",
    status_code=202,
    response_model=ReceivedEvents,
    summary="Send an event to a topic",
    description="Every trigger of the topic takes the JSON body: it starts or signals an "
    "execution unless its filter, dedup key, rate or the tenant's quotas say otherwise. "
    "The answer lists one received event per trigger (413 too large, 400 not JSON, 404 no "
    "trigger, 429 limited: recorded all the same).",
    responses=_RECEIVED,
    openapi_extra=_EVENT_BODY,
)
async def post_event(topic: str, request: Request, ctx: Ctx, principal: Operator) -> JSONResponse:
    """Send an event to the triggers of `topic`."""
    body = await request.body()
    engine = tenant_engine(ctx, principal)
    return _answer(await run_in_threadpool(receive_event, engine, topic, body))


@router.post(
    "/api/v1/hooks/{hook_id}",
    status_code=202,
    response_model=ReceivedEvents,
    summary="A trigger's inbound webhook",
    description="No API key: the request is signed with one of the trigger's secrets, "
    f"`{SIGNATURE_HEADER}: t=<unix seconds>,v1=<hex HMAC-SHA256 of '<t>.<body>'>`. A wrong "
    "signature, a timestamp outside the trigger's tolerance or a signature used before "
    "answers 401 and starts nothing.",
    responses=_RECEIVED,
    openapi_extra=_EVENT_BODY,
)
async def receive_hook(hook_id: str, request: Request, ctx: Ctx) -> JSONResponse:
    """Receive a signed webhook for the trigger whose URL this is."""
    body = await request.body()
    headers = {SIGNATURE_HEADER: request.headers.get(SIGNATURE_HEADER, "")}
    try:
        received = await run_in_threadpool(receive_webhook, ctx.engine, hook_id, body, headers)
    except SignatureRefused as exc:
        raise ApiProblem(401, str(exc)) from None
    return _answer(received)


@router.get(
    "/api/v1/events",
    response_model=ReceivedEventPage,
    summary="The events received",
    description="The tenant's received events, newest first: what each trigger made of "
    "each (never the payload). `cursor` in, `next_cursor` out.",
    responses=problem_responses(400),
)
def list_received_events(
    ctx: Ctx,
    principal: Viewer,
    cursor: Cursor = None,
    trigger: Annotated[str | None, Query(max_length=128, description="Only this trigger's")] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
) -> ReceivedEventPage:
    """A page of the events received."""
    engine = tenant_engine(ctx, principal)
    page = list_events(engine, trigger=trigger, before=decode_cursor(cursor), limit=limit)
    return ReceivedEventPage(
        items=[ReceivedEvent(**event_view(r)) for r in page.items],
        next_cursor=encode_cursor(page.next),
    )


class EndpointOut(BaseModel):
    name: str
    url: str
    events: list[str]
    filter: str | None
    secrets: list[str]  # the NAMES of the tenant's secrets, never a value
    updated_at: str
    updated_by: str


class AttemptOut(BaseModel):
    attempt: int
    at: str
    status_code: int | None
    error: str


class DeliveryOut(BaseModel):
    id: str  # the `Wovyr-Delivery` header: the same on every attempt
    endpoint: str
    event: str
    execution_id: str
    seq: int
    payload: dict[str, Any]
    status: str  # pending, delivered, filtered, dead
    attempts: int
    next_at: str
    last_error: str
    created_at: str
    updated_at: str


class DeliveryDetail(DeliveryOut):
    attempts_made: list[AttemptOut]


class DeliveryPage(BaseModel):
    items: list[DeliveryOut]
    next_cursor: str | None


@router.get(
    "/api/v1/webhooks", response_model=list[EndpointOut], summary="The tenant's webhook endpoints"
)
def list_webhooks(ctx: Ctx, principal: Admin) -> list[EndpointOut]:
    """The tenant's outbound webhook endpoints (secrets by name)."""
    return [
        EndpointOut(**endpoint_view(e))
        for e in ctx.engine.store.list_webhook_endpoints(principal.tenant)
    ]


@router.get("/api/v1/webhooks/{name}", response_model=EndpointOut, summary="A webhook endpoint")
def get_webhook(name: str, ctx: Ctx, principal: Admin) -> EndpointOut:
    """One webhook endpoint of the tenant."""
    found = ctx.engine.store.get_webhook_endpoint(principal.tenant, name)
    if found is None:
        raise NotFound(f"no webhook endpoint {name!r}")
    return EndpointOut(**endpoint_view(found))


@router.put(
    "/api/v1/webhooks/{name}",
    response_model=EndpointOut,
    summary="Add or replace a webhook endpoint",
    description="`url` (http or https), `events` (of `execution.completed`, "
    "`execution.failed`, `execution.cancelled`, `execution.approval_requested`), `secrets` "
    "(one or two names of the tenant's secrets: the first signs, both while a key is "
    "rotated) and an optional `filter` (a `${{ }}` condition on the delivery, read as "
    "`event`). Deliveries go as the tenant's side-effect policy allows. Audited.",
)
def put_webhook(
    name: str,
    ctx: Ctx,
    principal: Admin,
    body: dict[str, Any] = Body(  # noqa: B008 - FastAPI's way to take the whole body
        examples=[
            {
                "url": "https://hooks.example.com/wovyr",
                "events": ["execution.completed", "execution.failed"],
                "secrets": ["WEBHOOK_KEY"],
                "filter": "${{ event.execution.workflow == 'billing' }}",
            }
        ],
    ),
) -> EndpointOut:
    """Add or replace a webhook endpoint of the tenant."""
    engine = tenant_engine(ctx, principal)
    policy = engine.side_effect_policy()  # an address it refuses is refused now
    record = parse_endpoint(
        principal.tenant, name, body, by=principal.key_id, at=ctx.clock.now(), policy=policy
    )
    audit = engine.audit_entry(
        "webhook.set", name, {"url": record.url, "events": list(record.events)}
    )
    engine.store.put_webhook_endpoint(record, audit=audit)
    return EndpointOut(**endpoint_view(record))


@router.delete("/api/v1/webhooks/{name}", status_code=204, summary="Remove a webhook endpoint")
def delete_webhook(name: str, ctx: Ctx, principal: Admin) -> Response:
    """Remove a webhook endpoint (its pending deliveries end `dead`). Audited."""
    engine = tenant_engine(ctx, principal)
    audit = engine.audit_entry("webhook.delete", name)
    if not engine.store.delete_webhook_endpoint(principal.tenant, name, audit=audit):
        raise NotFound(f"no webhook endpoint {name!r}")
    return Response(status_code=204)


@router.get(
    "/api/v1/deliveries",
    response_model=DeliveryPage,
    summary="The webhook deliveries",
    description="The tenant's outbound deliveries, newest first (`endpoint`, `status`: "
    "pending, delivered, filtered, dead). `cursor` in, `next_cursor` out.",
    responses=problem_responses(400),
)
def list_deliveries(
    ctx: Ctx,
    principal: Viewer,
    cursor: Cursor = None,
    endpoint: Annotated[str | None, Query(max_length=128)] = None,
    status: Annotated[str | None, Query(pattern="^(pending|delivered|filtered|dead)$")] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
) -> DeliveryPage:
    """A page of the webhook deliveries."""
    page = ctx.engine.store.list_deliveries(
        principal.tenant,
        endpoint=endpoint,
        status=status,
        before=decode_cursor(cursor),
        limit=limit,
    )
    return DeliveryPage(
        items=[DeliveryOut(**delivery_view(d)) for d in page.items],
        next_cursor=encode_cursor(page.next),
    )


@router.get("/api/v1/deliveries/{delivery_id}", response_model=DeliveryDetail, summary="A delivery")
def get_delivery(delivery_id: str, ctx: Ctx, principal: Viewer) -> DeliveryDetail:
    """One delivery with every attempt made (status code, error)."""
    store = ctx.engine.store
    found = store.get_delivery(principal.tenant, delivery_id)
    if found is None:
        raise NotFound(f"no delivery {delivery_id!r}")
    attempts = store.delivery_attempts(principal.tenant, delivery_id)
    return DeliveryDetail(**delivery_view(found, attempts))
