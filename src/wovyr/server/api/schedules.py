"""`/api/v1/schedules`: the CLI's `wovyr schedules ...` over HTTP."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from typing import Any

from fastapi import Response

from wovyr.clock import utc
from wovyr.definition.model import Workflow
from wovyr.errors import Problem
from wovyr.scheduling.schedules import Schedules, spec_of
from wovyr.server.api.etags import ETAG_HEADER, PRECONDITION, TAGGED, IfMatch, check_unchanged, tag
from wovyr.server.api.models import (
    BackfillRequest,
    BackfillResult,
    NoteRequest,
    ScheduleCreate,
    ScheduleList,
    ScheduleOut,
    ScheduleUpdate,
    TriggerResult,
)
from wovyr.server.deps import Ctx, Operator, Viewer, schedules_for
from wovyr.server.guard import api_router
from wovyr.server.problems import ApiProblem, problem_responses
from wovyr.store.schedules import ScheduleRecord

__all__ = ["router"]

router = api_router("/api/v1/schedules", "schedules", 401, 403, 404, 409, 413, 422)
_FILE_SUFFIXES = (".yaml", ".yml", ".json")


def schedule_out(record: ScheduleRecord, service: Schedules) -> ScheduleOut:
    return ScheduleOut(
        id=record.id,
        workflow=record.workflow,
        definition_hash=record.definition_hash,
        spec=record.spec,
        describe=spec_of(record).describe(),
        overlap=record.overlap,
        catchup_window=record.catchup_window,
        paused=record.paused,
        note=record.note,
        input=record.input,
        start_at=record.start_at,
        end_at=record.end_at,
        remaining_actions=record.remaining_actions,
        next_fire_at=record.next_fire_at,
        next_fire_times=_next_fire_times(record, service),
        last_fire_at=record.last_fire_at,
        buffered=list(record.buffered),
        recent=list(record.recent),
        fired=record.fired_count,
        skipped=record.skipped_count,
        missed=record.missed_count,
        created_at=record.created_at,
        updated_at=record.updated_at,
    )


def _next_fire_times(record: ScheduleRecord, service: Schedules) -> list[datetime]:
    try:
        return service.next_fire_times(record)
    except (ValueError, OverflowError):  # ticks beyond datetime's range: show what exists
        return [record.next_fire_at] if record.next_fire_at else []


def _invalid(message: str, path: str) -> ApiProblem:
    return ApiProblem(422, message, problems=[Problem(message, path=path)])


def _target(service: Schedules, body: ScheduleCreate) -> str | Workflow:
    """A registered name, or the inline definition (pinned). Never a file on the server."""
    if (body.workflow is None) == (body.definition is None):
        raise _invalid("give exactly one of workflow or definition", "workflow")
    if body.workflow is not None:
        if body.workflow.endswith(_FILE_SUFFIXES):
            raise _invalid("a workflow name cannot end in .yaml, .yml or .json", "workflow")
        return body.workflow
    definition = body.definition
    text = definition if isinstance(definition, str) else json.dumps(definition, indent=2)
    workflow, _ = service.engine.resolve(text)
    return workflow


@router.post(
    "",
    status_code=201,
    response_model=ScheduleOut,
    summary="Create a schedule",
    responses={
        201: {"headers": ETAG_HEADER},
        **problem_responses(429),  # the tenant has its max_schedules already
    },
)
def create_schedule(
    body: ScheduleCreate, response: Response, ctx: Ctx, principal: Operator
) -> ScheduleOut:
    """A schedule (`cron` or `every`) that starts the registered `workflow` or an inline
    `definition` (pinned); a 429 when the tenant has its `max_schedules`."""
    service = schedules_for(ctx, principal)
    if (body.cron is None) == (body.every is None):
        raise _invalid("give exactly one of cron or every", "cron")
    record = service.create(
        body.id,
        workflow=_target(service, body),
        cron=body.cron,
        every=body.every,
        timezone=body.timezone,
        offset=body.offset,
        overlap=body.overlap,
        catchup_window=body.catchup_window,
        input=body.input,
        start_at=utc(body.start_at) if body.start_at else None,
        end_at=utc(body.end_at) if body.end_at else None,
        remaining_actions=body.remaining_actions,
        paused=body.paused,
        note=body.note,
        priority=body.priority,
    )
    return _tagged(response, schedule_out(record, service))


@router.get("", response_model=ScheduleList, summary="List schedules")
def list_schedules(ctx: Ctx, principal: Viewer) -> ScheduleList:
    """The tenant's schedules with their next fire times."""
    service = schedules_for(ctx, principal)
    return ScheduleList(items=[schedule_out(r, service) for r in service.list()[:1000]])


# What moves by itself as a schedule fires: not part of its ETag.
_MOVING = {
    "next_fire_at",
    "next_fire_times",
    "last_fire_at",
    "buffered",
    "recent",
    "fired",
    "skipped",
    "missed",
    "updated_at",
}


def _tagged(response: Response, out: ScheduleOut) -> ScheduleOut:
    return tag(response, out, _MOVING)


def _unchanged(service: Schedules, schedule_id: str, if_match: str | None) -> None:
    """404 for a missing (or another tenant's) schedule, then 412 for a stale `If-Match`."""
    check_unchanged(if_match, schedule_out(service.get(schedule_id), service), _MOVING)


@router.get(
    "/{schedule_id}",
    response_model=ScheduleOut,
    summary="One schedule",
    description="With its `ETag`: send it as `If-Match` with a change.",
    responses=TAGGED,
)
def get_schedule(schedule_id: str, response: Response, ctx: Ctx, principal: Viewer) -> ScheduleOut:
    service = schedules_for(ctx, principal)
    return _tagged(response, schedule_out(service.get(schedule_id), service))


@router.patch(
    "/{schedule_id}",
    response_model=ScheduleOut,
    summary="Change a schedule",
    description="The fields given change, the others keep their value. With `If-Match`, "
    "a 412 when the schedule changed since that ETag.",
    responses={**TAGGED, **PRECONDITION},
)
def update_schedule(
    schedule_id: str,
    body: ScheduleUpdate,
    response: Response,
    ctx: Ctx,
    principal: Operator,
    if_match: IfMatch = None,
) -> ScheduleOut:
    service = schedules_for(ctx, principal)
    changes: dict[str, Any] = {k: getattr(body, k) for k in body.model_fields_set}
    if changes.get("end_at") is not None:
        changes["end_at"] = utc(changes["end_at"])
    _unchanged(service, schedule_id, if_match)  # 404 before 422: another tenant's id tells nothing
    return _tagged(response, schedule_out(service.update(schedule_id, **changes), service))


def _noted_change(
    change: Callable[[Schedules, str, str | None], ScheduleRecord],
    schedule_id: str,
    response: Response,
    ctx: Ctx,
    principal: Operator,
    body: NoteRequest | None,
    if_match: str | None,
) -> ScheduleOut:
    """Pause or resume (`change(service, schedule_id, note)`) after the `If-Match` check."""
    service = schedules_for(ctx, principal)
    _unchanged(service, schedule_id, if_match)
    record = change(service, schedule_id, body.note if body else None)
    return _tagged(response, schedule_out(record, service))


@router.post(
    "/{schedule_id}/pause",
    response_model=ScheduleOut,
    summary="Pause",
    description="No tick fires while paused (`note` says why).",
    responses={**TAGGED, **PRECONDITION},
)
def pause_schedule(
    schedule_id: str,
    response: Response,
    ctx: Ctx,
    principal: Operator,
    body: NoteRequest | None = None,
    if_match: IfMatch = None,
) -> ScheduleOut:
    return _noted_change(Schedules.pause, schedule_id, response, ctx, principal, body, if_match)


@router.post(
    "/{schedule_id}/resume",
    response_model=ScheduleOut,
    summary="Resume",
    description="Ticks fire again from now (missed ones as the catch-up window says).",
    responses={**TAGGED, **PRECONDITION},
)
def resume_schedule(
    schedule_id: str,
    response: Response,
    ctx: Ctx,
    principal: Operator,
    body: NoteRequest | None = None,
    if_match: IfMatch = None,
) -> ScheduleOut:
    return _noted_change(Schedules.resume, schedule_id, response, ctx, principal, body, if_match)


@router.delete(
    "/{schedule_id}",
    status_code=204,
    summary="Delete a schedule",
    description="Executions it started are kept. With `If-Match`, a 412 when the schedule "
    "changed since that ETag.",
    responses=PRECONDITION,
)
def delete_schedule(
    schedule_id: str, ctx: Ctx, principal: Operator, if_match: IfMatch = None
) -> Response:
    service = schedules_for(ctx, principal)
    if if_match is not None:
        _unchanged(service, schedule_id, if_match)
    service.delete(schedule_id)
    return Response(status_code=204)


@router.post(
    "/{schedule_id}/trigger",
    status_code=201,
    response_model=TriggerResult,
    summary="Start one execution now",
)
def trigger_schedule(schedule_id: str, ctx: Ctx, principal: Operator) -> TriggerResult:
    """Start one execution of the schedule now, as a tick would."""
    return TriggerResult(execution_id=schedules_for(ctx, principal).trigger(schedule_id))


@router.post(
    "/{schedule_id}/backfill",
    status_code=201,
    response_model=BackfillResult,
    summary="Start every tick of a past range now",
)
def backfill_schedule(
    schedule_id: str, body: BackfillRequest, ctx: Ctx, principal: Operator
) -> BackfillResult:
    """Start every tick of the schedule in (`start`, `end`] now; a repeated backfill starts
    no tick twice."""
    service = schedules_for(ctx, principal)
    service.get(schedule_id)
    return BackfillResult(
        execution_ids=service.backfill(schedule_id, utc(body.start), utc(body.end))
    )
