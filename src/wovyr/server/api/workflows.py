"""`/api/v1/workflows`: start, list, inspect, history, live stream, logs, signal, approve,
cancel, rerun."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import hashlib
import json
from datetime import datetime
from typing import Annotated, Any

import orjson
import pydantic_core
from fastapi import Header, Query, Response
from fastapi.responses import StreamingResponse

from wovyr.clock import utc
from wovyr.engine.engine import Engine, ExecutionView
from wovyr.engine.labels import parse_label_pairs
from wovyr.engine.streams import StreamCursor
from wovyr.errors import NotFound, Problem
from wovyr.ids import new_id
from wovyr.platform.auth import Principal
from wovyr.server.api.models import (
    ApproveRequest,
    AttemptLogs,
    CancelRequest,
    EventOut,
    ExecutionDetail,
    ExecutionPage,
    HistoryPage,
    ItemsPage,
    QueryAnswer,
    QueryRequest,
    RerunRequest,
    SignalRequest,
    StartRequest,
    Status,
)
from wovyr.server.api.paging import (
    MAX_INDEX,
    Cursor,
    decode_cursor,
    encode_cursor,
    events_after,
    index_at,
    items_page,
    newest_events,
    opaque,
    page_items,
)
from wovyr.server.deps import Ctx, Operator, ServerContext, Viewer, tenant_engine
from wovyr.server.guard import api_router
from wovyr.server.problems import LOCATION_HEADER, ApiProblem, problem_responses
from wovyr.server.streams import EventStream
from wovyr.store.base import EventRecord, ExecutionRecord
from wovyr.store.platform import IdempotencyRecord, IdempotencyStore
from wovyr.traces import trace_context

__all__ = ["router"]

router = api_router("/api/v1/workflows", "workflows", 400, 401, 403, 404, 409, 413, 422)
_REPLAYED = {
    "Idempotent-Replayed": {
        "description": "`true` when an `Idempotency-Key` answered an earlier start.",
        "schema": {"type": "string"},
    }
}
_PREVIEW = 256
_WHOLE = 1024  # payloads up to this many bytes of JSON are listed whole
_TIMELINE = 50


# --- presenting ----------------------------------------------------------------------------
#
# The execution read paths build their answers as plain dicts, in the order of the response
# model's fields, and encode them once (`_json`): no pydantic model is built per execution
# or event (building them was most of a list's time), and no view is deep-copied. The bytes
# are those pydantic's encoder writes for the model (tests/server/test_encoding.py).


def payload(value: Any) -> dict[str, Any]:
    """`value` whole if its JSON is small, else its size and a preview (a `Payload`). Sized by
    orjson (a list of 50 summaries sizes 150 values: with the standard library that was a
    tenth of the server's time under a mixed load); what orjson refuses (integers beyond 64
    bits, very deep nesting) goes through the standard library as before."""
    if value is None:
        return {"size": 4, "truncated": False, "value": None, "preview": None}
    try:
        raw = orjson.dumps(value, default=str, option=orjson.OPT_NON_STR_KEYS)
    except orjson.JSONEncodeError:
        text = json.dumps(value, ensure_ascii=False, default=str, separators=(",", ":"))
        raw = text.encode("utf-8", "surrogatepass")
    if len(raw) <= _WHOLE:
        return {"size": len(raw), "truncated": False, "value": value, "preview": None}
    preview = raw[: _PREVIEW * 4].decode("utf-8", "ignore")[:_PREVIEW]
    return {"size": len(raw), "truncated": True, "value": None, "preview": preview}


def summary(r: ExecutionRecord) -> dict[str, Any]:
    """An `ExecutionSummary`: every field comes typed from the store."""
    return {
        "id": r.id,
        "workflow": r.workflow,
        "version": r.version,
        "status": r.shown_status,
        "created_at": r.created_at,
        "updated_at": r.updated_at,
        "waiting_on": r.waiting_on,
        "parent_id": r.parent_id,
        "input": payload(r.input),
        "output": payload(r.output),
        "error": payload(r.error),
        "labels": dict(r.labels),
    }


def event_out(e: EventRecord) -> dict[str, Any]:
    """An `EventOut`."""
    return {"seq": e.seq, "type": e.type, "at": e.at, "data": e.data}


_FOLLOW = (
    "A run that continued as new answers with its chain's live (or last) run; false: "
    "this run itself."
)
_VIEW_FIELDS = tuple(f.name for f in dataclasses.fields(ExecutionView))


def detail(
    ctx: ServerContext,
    engine: Engine,
    execution_id: str,
    events: int = _TIMELINE,
    *,
    follow: bool = True,
    status_code: int = 200,
    headers: dict[str, str] | None = None,
    view: ExecutionView | None = None,
) -> Response:
    """One execution (a chain's live or last run, when `follow`), with its newest events,
    as the response (`ExecutionDetail`, whose fields are the view's and `timeline`). Paged
    by bytes (`wovyr.server.api.paging`): the items of its `for_each` activities as far
    as they fit, the timeline within a quarter of the page.

    `view`: the state a steering call left (a signal, a decision), shown as of that call,
    with the events up to it: read again, it could already show what a worker did next."""
    if view is None:
        view = engine.query(execution_id, follow=follow)
    budget = ctx.settings.max_page_bytes
    timeline = newest_events(engine, view.id, view.event_count, events, budget // 4)
    shown = {name: getattr(view, name) for name in _VIEW_FIELDS}  # the view is not changed
    out = page_items(shown, budget - budget // 4)
    out["timeline"] = [event_out(e) for e in timeline]
    return _json(out, status_code, headers)


def _json(
    values: dict[str, Any], status_code: int = 200, headers: dict[str, str] | None = None
) -> Response:
    """`values` encoded as pydantic's encoder writes them: by orjson (times in UTC with a
    `Z`), and what orjson refuses (integers beyond 64 bits, very deep nesting) by
    pydantic's own encoder."""
    try:
        body = orjson.dumps(values, option=orjson.OPT_UTC_Z | orjson.OPT_NON_STR_KEYS)
    except orjson.JSONEncodeError:
        body = pydantic_core.to_json(values)
    return Response(body, status_code=status_code, headers=headers, media_type="application/json")


# --- starting --------------------------------------------------------------------------------


def _fingerprint(body: StartRequest) -> str:
    canonical = json.dumps(body.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def _claim_key(ctx: ServerContext, principal: Principal, key: str, body: StartRequest) -> str:
    store: IdempotencyStore = ctx.engine.store
    now = ctx.clock.now()
    record = IdempotencyRecord(
        principal.tenant, key, _fingerprint(body), body.id or new_id(now), now
    )
    held = store.claim_idempotency_key(record)
    if held.fingerprint != record.fingerprint:
        raise ApiProblem(
            422,
            "This Idempotency-Key was already used with a different request body.",
            slug="idempotency-key-reused",
        )
    return held.execution_id


@router.post(
    "",
    status_code=201,
    response_model=ExecutionDetail,
    summary="Start an execution",
    description="Starts an inline `definition` or the registered `workflow` (its latest "
    "version, or `version`) with `input`. The same `id`, or the same `Idempotency-Key` with "
    "the same body, answers the existing execution with 200 (`Idempotent-Replayed: true`); "
    "a quota reached is a 429 with `Retry-After`.",
    responses={
        200: {
            "description": "The execution already existed (same id or same key).",
            "headers": {**LOCATION_HEADER, **_REPLAYED},
        },
        201: {"headers": LOCATION_HEADER},
        **problem_responses(429),
    },
)
def start_workflow(
    body: StartRequest,
    ctx: Ctx,
    principal: Operator,
    idempotency_key: Annotated[
        str | None, Header(alias="Idempotency-Key", min_length=1, max_length=200)
    ] = None,
    # never refused: an invalid context starts a new trace (W3C), it fails no start
    traceparent: Annotated[
        str | None,
        Header(
            description="W3C trace context: with tracing on, the start's span continues it "
            "(an invalid one is ignored)"
        ),
    ] = None,
    tracestate: Annotated[str | None, Header(description="W3C trace state")] = None,
) -> Response:
    if (body.definition is None) == (body.workflow is None):
        raise ApiProblem(
            422,
            "Give exactly one of `definition` or `workflow`.",
            problems=[Problem("give exactly one of definition or workflow", path="definition")],
        )
    definition = _document(body.definition)
    claim = None  # the key is spent only on a valid start: the engine calls this after checks
    if idempotency_key is not None:
        claim = functools.partial(_claim_key, ctx, principal, idempotency_key, body)
    engine = tenant_engine(ctx, principal)
    try:
        started = engine.submit(
            definition,
            body.input,
            name=body.workflow,
            version=body.version if body.workflow is not None else None,
            execution_id=body.id,
            claim_id=claim,
            labels=body.labels or None,
            priority=body.priority,
            trace=trace_context({"traceparent": traceparent or "", "tracestate": tracestate or ""}),
        )
    except NotFound as exc:
        if body.workflow is None:
            raise
        # An unknown name makes the request invalid (a 404 would say the URL is missing).
        raise ApiProblem(422, exc.message, problems=[Problem(exc.message, "workflow")]) from None
    headers = {"Location": f"{router.prefix}/{started.record.id}"}
    if not started.created and idempotency_key is not None:
        headers["Idempotent-Replayed"] = "true"
    status = 201 if started.created else 200
    return detail(ctx, engine, started.record.id, status_code=status, headers=headers)


# --- reading ---------------------------------------------------------------------------------


@router.get("", response_model=ExecutionPage, summary="List executions, newest first")
def list_workflows(
    ctx: Ctx,
    principal: Viewer,
    workflow: Annotated[str | None, Query(max_length=200)] = None,
    status: Status | None = None,
    created_after: datetime | None = None,
    created_before: datetime | None = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    cursor: Annotated[str | None, Query(max_length=500)] = None,
    label: Annotated[
        list[str] | None,
        Query(
            max_length=300,
            description="`key=value`: only executions with this label "
            "(repeat for several: all of them).",
        ),
    ] = None,
    id_prefix: Annotated[
        str | None, Query(min_length=1, max_length=200, description="Ids starting with it.")
    ] = None,
    name: Annotated[
        str | None,
        Query(
            min_length=1,
            max_length=200,
            description="Workflow names containing it, any case (ignored with `workflow`).",
        ),
    ] = None,
) -> Response:
    """Executions of the tenant, newest first: summary columns (inputs, outputs and errors
    whole up to 1 KiB, else a preview), filtered by workflow, status, creation time, labels,
    id prefix or name. Follow `next_cursor`."""
    page = tenant_engine(ctx, principal).list(
        labels=parse_label_pairs(label or [], "label") if label else None,
        id_prefix=id_prefix,
        name=name,
        workflow=workflow,
        status=status,
        created_after=utc(created_after) if created_after else None,
        created_before=utc(created_before) if created_before else None,
        limit=limit,
        cursor=decode_cursor(cursor),
    )
    items = [summary(r) for r in page.items]  # an `ExecutionPage`, encoded once (as `detail`)
    return _json({"items": items, "next_cursor": encode_cursor(page.next_cursor)})


@router.get("/{execution_id}", response_model=ExecutionDetail, summary="One execution")
def get_workflow(
    execution_id: str,
    ctx: Ctx,
    principal: Viewer,
    events: Annotated[int, Query(ge=0, le=500, description="Newest events to include.")] = 50,
    follow: Annotated[bool, Query(description=_FOLLOW)] = True,
) -> Response:
    """One execution: its status (and what it waits on), activities with their states and
    outputs, input, output, error, and its newest events (`timeline`)."""
    return detail(ctx, tenant_engine(ctx, principal), execution_id, events, follow=follow)


@router.get(
    "/{execution_id}/history",
    response_model=HistoryPage,
    summary="Events, paged",
    description="At most `limit` events, and no more than fit in the server's page bytes "
    "(WOVYR_MAX_PAGE_BYTES, one event at least): follow `next_after_seq`.",
)
def get_history(
    execution_id: str,
    ctx: Ctx,
    principal: Viewer,
    after_seq: Annotated[
        int | None, Query(ge=0, le=MAX_INDEX, description="Default: the newest page.")
    ] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    follow: Annotated[bool, Query(description=_FOLLOW)] = True,
    cursor: Cursor = None,
) -> HistoryPage:
    after_seq = index_at(cursor, after_seq)
    engine = tenant_engine(ctx, principal)
    record = engine.live(execution_id) if follow else engine.get(execution_id)
    total, budget = record.seq, ctx.settings.max_page_bytes
    if after_seq is None:
        items = newest_events(engine, record.id, total, limit, budget)
    else:
        items = events_after(engine, record.id, after_seq, limit, budget)
    last = items[-1].seq if items else (after_seq or total)
    following = last if last < total else None
    return HistoryPage(
        items=[EventOut.model_construct(**event_out(e)) for e in items],
        total=total,
        next_after_seq=following,
        next_cursor=opaque(following),
    )


@router.get(
    "/{execution_id}/activities/{activity}/items",
    response_model=ItemsPage,
    summary="A for_each activity's items, paged",
    description="From index `start`: at most `limit` items, and no more than fit in the "
    "server's page bytes (one at least). An execution's detail gives the first ones and "
    "each map's `items_next`, where this goes on.",
)
def get_items(
    execution_id: str,
    activity: str,
    ctx: Ctx,
    principal: Viewer,
    start: Annotated[
        int, Query(ge=0, le=MAX_INDEX, description="The index of the first item.")
    ] = 0,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 1000,
    follow: Annotated[bool, Query(description=_FOLLOW)] = True,
    cursor: Cursor = None,
) -> ItemsPage:
    start = index_at(cursor, start)
    view = tenant_engine(ctx, principal).query(execution_id, follow=follow)
    act = view.activities.get(activity)
    if act is None or act.get("items") is None:
        raise ApiProblem(404, f"Execution {view.id} has no for_each activity {activity!r}.")
    items, following = items_page(act["items"], start, limit, ctx.settings.max_page_bytes)
    return ItemsPage(
        items=items,
        start=start,
        total=len(act["items"]),
        next_start=following,
        next_cursor=opaque(following),
    )


_STREAM = """Server-Sent Events: `event` (an event as it commits), `attempt` (a model call
began streaming: earlier text of that activity and turn was an earlier attempt's), `token`
(the next piece of its text), `end` (finished, all sent). Every message has an `id`:
reconnect with `Last-Event-ID` to continue exactly after it."""


@router.get(
    "/{execution_id}/stream",
    summary="Live events and streamed model text (Server-Sent Events)",
    description=_STREAM,
    response_class=StreamingResponse,
    responses={200: {"content": {"text/event-stream": {}}}},
)
async def stream_workflow(
    execution_id: str,
    ctx: Ctx,
    principal: Viewer,
    last_event_id: Annotated[
        str | None, Header(description="The id of the last message received.")
    ] = None,
    after: Annotated[
        str | None, Query(description="As `Last-Event-ID`, for clients that cannot set it.")
    ] = None,
) -> StreamingResponse:
    engine = tenant_engine(ctx, principal)
    return await sse_response(ctx, engine, execution_id, last_event_id or after)


async def sse_response(
    ctx: ServerContext, engine: Engine, execution_id: str, position: str | None
) -> StreamingResponse:
    """The stream of `engine`'s tenant's execution from `position` (a message id)."""
    cursor = StreamCursor()
    if position:
        try:
            cursor = StreamCursor.parse(position)
        except ValueError:
            raise ApiProblem(
                400,
                "Last-Event-ID is not an id this stream sent.",
                problems=[Problem("bad stream position", "Last-Event-ID")],
            ) from None
    await asyncio.to_thread(engine.get, execution_id)  # another tenant's: the uniform 404
    frames = ctx.streams.messages(engine.store, engine.tenant, execution_id, cursor)
    return EventStream(
        frames,
        headers={"X-Accel-Buffering": "no"},  # a proxy must not hold the stream back
    )


@router.get(
    "/{execution_id}/logs", response_model=AttemptLogs, summary="Attempts' logs and tracebacks"
)
def get_logs(
    execution_id: str,
    ctx: Ctx,
    principal: Viewer,
    after_seq: Annotated[
        int, Query(ge=0, le=MAX_INDEX, description="Only attempts ended after it.")
    ] = 0,
    follow: Annotated[bool, Query(description=_FOLLOW)] = True,
    cursor: Cursor = None,
) -> AttemptLogs:
    """The attempts that logged or failed, in history order: their log lines (secrets
    masked), errors and tracebacks. Pass `next_cursor` to read only newer ones."""
    after_seq = index_at(cursor, after_seq)
    items, last, finished = tenant_engine(ctx, principal).logs(
        execution_id, after_seq, follow=follow
    )
    return AttemptLogs(
        items=items, next_after_seq=last, next_cursor=opaque(last), finished=finished
    )


def _document(definition: str | dict[str, Any] | None) -> str | None:
    """A definition in a request body as the document it is parsed as (an object as JSON
    text: its errors are located)."""
    if definition is None or isinstance(definition, str):
        return definition
    return json.dumps(definition, indent=2)


# --- steering --------------------------------------------------------------------------------


@router.post("/{execution_id}/query", response_model=QueryAnswer, summary="Ask a workflow function")
def query_workflow(
    execution_id: str, body: QueryRequest, ctx: Ctx, principal: Viewer
) -> QueryAnswer:
    """Answer the query `name` (an `@wf.query` of a workflow function) from a replay of the
    execution as it stands, recording nothing: what the function published in `ctx.state`
    and its steps' results. 404: no such execution; 422: no such query, or arguments it
    does not take; 409: a workflow document's execution, or a function this server has
    not loaded (`wovyr serve -a MODULE`)."""
    from wovyr.code.workflow import answer_query
    from wovyr.engine.core.state import state_from_json

    engine = tenant_engine(ctx, principal)
    record = engine.get(execution_id)
    stored = engine.definition(record.definition_hash)
    state = state_from_json(record.checkpoint or {})
    result = answer_query(stored, state, body.name, body.args, engine.clock.now())
    return QueryAnswer(query=body.name, result=result)


@router.post("/{execution_id}/signal", response_model=ExecutionDetail, summary="Send a signal")
def signal_workflow(
    execution_id: str, body: SignalRequest, ctx: Ctx, principal: Operator
) -> Response:
    """Send the signal `name` with `payload`: buffered until a wait consumes it, in order."""
    engine = tenant_engine(ctx, principal)
    pinned = _document(body.definition)
    view = engine.signal(execution_id, body.name, body.payload, definition=pinned)
    return detail(ctx, engine, execution_id, view=view)


@router.post("/{execution_id}/approve", response_model=ExecutionDetail, summary="Decide")
def approve_workflow(
    execution_id: str, body: ApproveRequest, ctx: Ctx, principal: Operator
) -> Response:
    """Decide the approval `activity` (approved or not, with a comment), recorded as decided
    by the key's actor; an agent paused on its budget can be granted more."""
    engine = tenant_engine(ctx, principal)
    grant = body.grant.model_dump(exclude_none=True) if body.grant is not None else None
    view = engine.approve(
        execution_id,
        body.activity,
        body.approved,
        by=principal.actor,
        comment=body.comment,
        grant=grant,
        definition=_document(body.definition),
    )
    return detail(ctx, engine, execution_id, view=view)


@router.post(
    "/{execution_id}/cancel",
    response_model=ExecutionDetail,
    summary="Cancel",
    description="Writes `ExecutionCancelled` (pending and waiting activities skipped, a late "
    "result refused, children cancelled) and answers only once it is durable; 409 if the "
    "execution already finished. The body (`reason`) is optional.",
)
def cancel_workflow(
    execution_id: str,
    ctx: Ctx,
    principal: Operator,
    body: CancelRequest | None = None,
) -> Response:
    engine = tenant_engine(ctx, principal)
    engine.cancel(execution_id, reason=body.reason if body else None, by=principal.actor)
    return detail(ctx, engine, execution_id)


@router.delete("/{execution_id}", include_in_schema=False)
def cancel_moved(execution_id: str) -> Response:
    """`DELETE` used to cancel: it answers 405 and says where cancel went (a future version
    may make it delete a finished execution)."""
    raise ApiProblem(
        405,
        f"Cancel is POST {router.prefix}/{execution_id}/cancel (DELETE no longer cancels).",
        headers={"Allow": "GET"},
        slug="cancel-moved",
    )


@router.post(
    "/{execution_id}/rerun",
    status_code=201,
    response_model=ExecutionDetail,
    summary="Rerun as a new execution",
    description="Starts a new execution linked to this finished one (`rerun_of`); 409 when "
    "it still runs, or (with `latest`) when the newest definition cannot take the reused "
    "results, with the reason.",
    responses={201: {"headers": LOCATION_HEADER}},
)
def rerun_workflow(
    execution_id: str, body: RerunRequest, ctx: Ctx, principal: Operator
) -> Response:
    engine = tenant_engine(ctx, principal)
    record = engine.rerun(
        execution_id,
        start_from=body.start_from,
        input=body.input,
        latest=body.latest,
        new_id=body.id,
    )
    location = {"Location": f"{router.prefix}/{record.id}"}
    return detail(ctx, engine, record.id, follow=False, status_code=201, headers=location)
