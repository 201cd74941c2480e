"""Schedules: create, inspect, pause/resume, update, delete, trigger, backfill, and dispatch.

A fire is ONE store transaction: the schedule row is compare-and-set on its version and the
executions it starts are inserted with it. Each tick's execution id is derived from the
schedule and the tick (`<schedule>-<YYYYmmddTHHMMSS>Z`), so even a retried fire cannot start
a tick twice. Overlap policies, when the execution a schedule started last is still running:

- ``skip`` (default): the tick is skipped and counted;
- ``buffer_one``: one tick waits and starts when the running one ends; later ones are skipped;
- ``buffer_all``: every tick waits, in order (at most 1,000);
- ``cancel_other``: the running one is cancelled and the tick starts;
- ``allow_all``: the tick starts regardless.

Catch-up after downtime follows `spec.catch_up`: ticks within ``catchup_window`` of now run,
in order, subject to overlap; older ones are skipped and counted as missed. Pausing stops
firing; resuming starts from the next tick after now (nothing missed while paused replays,
unless a backfill asks for it).

Quotas (`wovyr.engine.quotas`): no schedule fires more often than the store-wide minimum
interval (`Engine.min_schedule_interval`, default 1 s) nor than its tenant's
`max_schedule_rate` allows, refused when it is created or changed; a tenant has at most
`max_schedules` schedules (creating one more is `QuotaExceeded`). A fire whose starts the
tenant's quota refuses starts none of them: its ticks are counted as skipped and the fire
is listed in `recent` with `skipped` (the reason) instead of an execution.
"""

from __future__ import annotations

import builtins
import contextlib
import itertools
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from wovyr.definition.inputs import resolve_inputs
from wovyr.definition.model import Workflow
from wovyr.engine.engine import Engine, check_priority
from wovyr.errors import (
    Conflict,
    ExecutionFinished,
    InputError,
    NotFound,
    Problem,
    QuotaExceeded,
)
from wovyr.fields import parse_duration
from wovyr.ids import validate_execution_id
from wovyr.scheduling.overlap import OVERLAP_POLICIES, plan_overlap
from wovyr.scheduling.spec import CronSpec, IntervalSpec, Spec, catch_up, parse_spec
from wovyr.store.audit import AuditEntry, payload_digest
from wovyr.store.base import NewExecution
from wovyr.store.schedules import ScheduleRecord, ScheduleStore, ScheduleWrite

__all__ = ["OVERLAP_POLICIES", "Schedules", "spec_of", "tick_execution_id"]

_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._\-]{0,127}$")
_MAX_BACKFILL = 1000
_RECENT = 10


def spec_of(record: ScheduleRecord) -> Spec:
    s = record.spec
    return parse_spec(s.get("cron"), s.get("every"), s.get("timezone"), s.get("offset"))


def tick_execution_id(schedule_id: str, tick: datetime) -> str:
    """`<schedule>-<YYYYmmddTHHMMSS>[.ffffff]Z`: one id per tick, so no tick starts twice.
    Ids are per tenant, so another tenant's schedule of the same name has its own ticks (ids
    written before that had `<tenant>.` in front for tenants other than `default`; those
    executions keep them). A schedule id is at most 128 characters of the execution id
    alphabet, so a tick id is always a valid execution id."""
    fraction = f".{tick.microsecond:06d}" if tick.microsecond else ""
    return validate_execution_id(f"{schedule_id}-{tick.strftime('%Y%m%dT%H%M%S')}{fraction}Z")


def _bad(message: str, path: str) -> InputError:
    return InputError([Problem(message, path=path)])


class Schedules:
    """Schedule operations over an engine whose store implements `ScheduleStore`."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.store: ScheduleStore = engine.store

    # --- operations ----------------------------------------------------------------------

    def create(
        self,
        schedule_id: str,
        *,
        workflow: str | Workflow | Path | None = None,
        cron: str | None = None,
        every: str | float | None = None,
        timezone: str | None = None,
        offset: str | float | None = None,
        overlap: str = "skip",
        catchup_window: str | float = 60.0,
        input: dict[str, Any] | None = None,
        start_at: datetime | None = None,
        end_at: datetime | None = None,
        remaining_actions: int | None = None,
        paused: bool = False,
        note: str | None = None,
        priority: int | None = None,
    ) -> ScheduleRecord:
        """Create a schedule; nothing is stored when anything is invalid. `priority` (0-9)
        is the priority of every execution it starts (kept in its spec)."""
        if not _ID.match(schedule_id or ""):
            raise _bad("schedule ids are 1-128 letters, digits, '.', '_' or '-'", "id")
        spec = self._spec(cron, every, timezone, offset)
        check_priority(priority)
        name, digest, definition, pinned = self._workflow(workflow)
        self.engine.check_side_effects(definition)
        inputs = resolve_inputs(definition, input or {})
        window = self._window(catchup_window)
        if overlap not in OVERLAP_POLICIES:
            raise _bad(f"overlap must be one of {', '.join(OVERLAP_POLICIES)}", "overlap")
        if remaining_actions is not None and remaining_actions < 0:
            raise _bad("remaining_actions cannot be negative", "remaining_actions")
        if start_at and end_at and end_at <= start_at:
            raise _bad("end_at must be after start_at", "end_at")
        now = self.engine.clock.now()
        record = ScheduleRecord(
            id=schedule_id,
            workflow=name,
            spec={**_spec_dict(spec), **({"priority": priority} if priority else {})},
            created_at=now,
            updated_at=now,
            tenant=self.engine.tenant,
            definition_hash=digest if pinned else None,
            input=inputs,
            overlap=overlap,
            catchup_window=window,
            paused=paused,
            note=note,
            start_at=start_at,
            end_at=end_at,
            remaining_actions=remaining_actions,
        )
        record = replace(record, next_fire_at=None if paused else self._first_tick(record, now))
        details = {
            "workflow": name,
            "definition_hash": record.definition_hash,
            "spec": record.spec,
            "overlap": overlap,
            "paused": paused,
            "input": payload_digest(inputs),
        }
        audit = self.engine.audit_entry("schedule.create", schedule_id, details)
        cap = self.engine.quotas().max_schedules
        if not self.store.create_schedule(record, audit=audit, max_count=cap):
            raise Conflict(f"schedule {schedule_id!r} already exists")
        return record

    def get(self, schedule_id: str) -> ScheduleRecord:
        record = self.store.get_schedule(schedule_id, self.engine.tenant)
        if record is None:
            raise NotFound(f"schedule {schedule_id!r} not found")
        return record

    def list(self) -> builtins.list[ScheduleRecord]:
        return self.store.list_schedules(self.engine.tenant)

    def next_fire_times(self, record: ScheduleRecord, count: int = 5) -> builtins.list[datetime]:
        if record.paused or record.next_fire_at is None:
            return []
        spec, out = spec_of(record), [record.next_fire_at]
        while len(out) < count:
            tick = spec.next_after(out[-1])
            if record.end_at and tick > record.end_at:
                break
            out.append(tick)
        return out[:count]

    def delete(self, schedule_id: str) -> None:
        audit = self.engine.audit_entry("schedule.delete", schedule_id)
        if not self.store.delete_schedule(schedule_id, self.engine.tenant, audit=audit):
            raise NotFound(f"schedule {schedule_id!r} not found")

    def pause(self, schedule_id: str, note: str | None = None) -> ScheduleRecord:
        return self._change(
            schedule_id,
            "schedule.pause",
            lambda r, now: replace(
                r, paused=True, note=note if note is not None else r.note, next_fire_at=None
            ),
        )

    def resume(self, schedule_id: str, note: str | None = None) -> ScheduleRecord:
        return self._change(
            schedule_id,
            "schedule.resume",
            lambda r, now: replace(
                r,
                paused=False,
                note=note if note is not None else r.note,
                next_fire_at=self._first_tick(r, now),
            ),
        )

    def update(self, schedule_id: str, **changes: Any) -> ScheduleRecord:
        """Change spec (cron/every/timezone/offset), overlap, catchup_window, input, note,
        end_at or remaining_actions; the next tick is recomputed from now."""
        allowed = {
            "cron",
            "every",
            "timezone",
            "offset",
            "overlap",
            "catchup_window",
            "input",
            "note",
            "end_at",
            "remaining_actions",
        }
        unknown = set(changes) - allowed
        if unknown:
            raise _bad(f"cannot update {', '.join(sorted(unknown))}", "update")

        def apply(r: ScheduleRecord, now: datetime) -> ScheduleRecord:
            spec_keys = {"cron", "every", "timezone", "offset"}
            updated = r
            if spec_keys & set(changes):
                merged = {**r.spec, **{k: changes[k] for k in spec_keys if k in changes}}
                if changes.get("cron"):
                    merged["every"] = None
                if changes.get("every"):
                    merged["cron"] = None
                spec = self._spec(
                    merged.get("cron"),
                    merged.get("every"),
                    merged.get("timezone"),
                    merged.get("offset"),
                )
                kept = {"priority": r.spec["priority"]} if r.spec.get("priority") else {}
                updated = replace(updated, spec={**_spec_dict(spec), **kept})
            if "overlap" in changes:
                if changes["overlap"] not in OVERLAP_POLICIES:
                    raise _bad(f"overlap must be one of {', '.join(OVERLAP_POLICIES)}", "overlap")
                updated = replace(updated, overlap=changes["overlap"])
            if "catchup_window" in changes:
                updated = replace(updated, catchup_window=self._window(changes["catchup_window"]))
            if "input" in changes:
                _, _, definition = self._definition_for(r)
                updated = replace(updated, input=resolve_inputs(definition, changes["input"]))
            for key in ("note", "end_at", "remaining_actions"):
                if key in changes:
                    updated = replace(updated, **{key: changes[key]})
            if not updated.paused:
                updated = replace(updated, next_fire_at=self._first_tick(updated, now))
            return updated

        changed = {k: payload_digest(v) if k == "input" else v for k, v in changes.items()}
        return self._change(schedule_id, "schedule.update", apply, {"changes": changed})

    def trigger(self, schedule_id: str) -> str:
        """Start one execution now, whatever the spec and overlap policy say."""
        now = self.engine.clock.now()
        record = self.get(schedule_id)
        manual = tick_execution_id(f"{schedule_id}-manual", now)
        new = self._prepare(record, now, manual)
        self._commit_fire(
            record,
            now,
            [new],
            [],
            skipped=0,
            missed=0,
            next_fire_at=record.next_fire_at,
            buffered=record.buffered,
            audit=self.engine.audit_entry(
                "schedule.trigger", schedule_id, {"execution_id": new.id}
            ),
        )
        return new.id

    def backfill(self, schedule_id: str, start: datetime, end: datetime) -> builtins.list[str]:
        """Start every tick in (start, end] now, in order; ticks already started are not
        started again (ids are derived from the tick), and overlap is not applied."""
        if end <= start:
            raise _bad("the backfill end must be after its start", "end")
        record = self.get(schedule_id)
        ticks = spec_of(record).ticks_between(start, end, limit=_MAX_BACKFILL + 1)
        if len(ticks) > _MAX_BACKFILL:
            raise _bad(f"a backfill starts at most {_MAX_BACKFILL} ticks; narrow the range", "end")
        now = self.engine.clock.now()
        starts = [self._prepare(record, now, tick_execution_id(schedule_id, t), t) for t in ticks]
        details = {"start": start.isoformat(), "end": end.isoformat(), "ticks": len(starts)}
        self._commit_fire(
            record,
            now,
            starts,
            [],
            skipped=0,
            missed=0,
            next_fire_at=record.next_fire_at,
            buffered=record.buffered,
            audit=self.engine.audit_entry("schedule.backfill", schedule_id, details),
        )
        return [s.id for s in starts]

    # --- dispatch ------------------------------------------------------------------------

    def dispatch_due(self, limit: int = 100) -> int:
        """Fire every due schedule (and buffered ticks whose blocker ended); returns the
        number of executions started. A schedule with nothing to do costs no write."""
        started = 0
        now = self.engine.clock.now()
        for record in self.store.due_schedules(now, limit):
            service = (
                self
                if record.tenant == self.engine.tenant
                else Schedules(self.engine.for_tenant(record.tenant))
            )
            with contextlib.suppress(NotFound, InputError, Conflict):
                started += service._fire(record, now)
        return started

    def _fire(self, record: ScheduleRecord, now: datetime) -> int:
        spec = spec_of(record)
        ticks: builtins.list[datetime] = []
        missed = 0
        next_fire_at = record.next_fire_at
        if next_fire_at is not None and next_fire_at <= now:
            due = catch_up(spec, next_fire_at, now, record.catchup_window)
            ticks, missed, next_fire_at = list(due.run), due.skipped, due.next_fire_at
            if record.end_at is not None:
                missed += sum(1 for t in ticks if t > record.end_at)
                ticks = [t for t in ticks if t <= record.end_at]
                if next_fire_at > record.end_at:
                    next_fire_at = None
        running = [i for i in record.running if self._is_running(i)]
        queue = [datetime.fromisoformat(t) for t in record.buffered] + ticks
        plan = plan_overlap(
            record.overlap,
            queue,
            running,
            lambda tick: tick_execution_id(record.id, tick),
            record.remaining_actions,
        )
        starts = [
            self._prepare(record, now, tick_execution_id(record.id, t), t)
            for t in plan.start
            if not self._exists(tick_execution_id(record.id, t))
        ]
        cancels, buffered, skipped = plan.cancel, plan.buffered, plan.skipped
        remaining = record.remaining_actions
        next_if_refused = next_fire_at  # a refused fire uses up no remaining action
        if remaining is not None and remaining - len(starts) <= 0:
            next_fire_at = None
        unchanged = (
            not starts
            and not cancels
            and not skipped
            and not missed
            and buffered == record.buffered
            and next_fire_at == record.next_fire_at
            and tuple(running) == record.running
        )
        if unchanged:
            return 0
        try:
            committed = self._commit_fire(
                record,
                now,
                starts,
                running,
                skipped=skipped,
                missed=missed,
                next_fire_at=next_fire_at,
                buffered=buffered,
            )
        except QuotaExceeded as exc:  # nothing was written: the ticks are skipped, with why
            self._commit_fire(
                record,
                now,
                [],
                running,
                skipped=skipped + len(starts),
                missed=missed,
                next_fire_at=next_if_refused,
                buffered=buffered,
                refused=[(s, exc.message) for s in starts],
            )
            return 0
        if not committed:
            return 0
        for execution_id in cancels:
            with contextlib.suppress(ExecutionFinished, NotFound):
                self.engine.cancel(execution_id, reason=f"schedule {record.id}: cancel_other")
        return len(starts)

    def _commit_fire(
        self,
        record: ScheduleRecord,
        now: datetime,
        starts: builtins.list[NewExecution],
        running: builtins.list[str],
        *,
        skipped: int,
        missed: int,
        next_fire_at: datetime | None,
        buffered: tuple[str, ...],
        refused: Sequence[tuple[NewExecution, str]] = (),
        audit: AuditEntry | None = None,
    ) -> bool:
        fired: builtins.list[dict[str, Any]] = [
            {
                "tick": s.first_step.events[0].data.get("scheduled_at"),
                "execution_id": s.id,
                "started_at": now.isoformat(),
            }
            for s in starts
        ]
        fired += [
            {"tick": s.first_step.events[0].data.get("scheduled_at"), "skipped": reason}
            for s, reason in refused
        ]
        remaining = record.remaining_actions
        if remaining is not None:
            remaining = max(0, remaining - len(starts))
        updated = replace(
            record,
            next_fire_at=next_fire_at,
            buffered=buffered,
            running=tuple([*running, *(s.id for s in starts)][-100:]),
            recent=tuple([*record.recent, *fired][-_RECENT:]),
            fired_count=record.fired_count + len(starts),
            skipped_count=record.skipped_count + skipped,
            missed_count=record.missed_count + missed,
            last_fire_at=now if starts else record.last_fire_at,
            remaining_actions=remaining,
            updated_at=now,
            version=record.version + 1,
        )
        if not self.store.update_schedule(
            ScheduleWrite(updated, record.version, starts), audit=audit
        ):
            return False
        for new in starts:
            self.engine.notify(new.id, new.tenant)
            self.engine.enforce_on_limit(new)
        return True

    # --- helpers -------------------------------------------------------------------------

    def _prepare(
        self, record: ScheduleRecord, now: datetime, execution_id: str, tick: datetime | None = None
    ) -> NewExecution:
        _, digest, definition = self._definition_for(record)
        extra = {"schedule": record.id, "scheduled_at": (tick or now).isoformat()}
        priority = record.spec.get("priority")
        return self.engine.prepare_start(
            definition,
            digest,
            record.input,
            execution_id=execution_id,
            extra=extra,
            priority=int(priority) if priority else None,
        )

    def _definition_for(self, record: ScheduleRecord) -> tuple[str, str, Workflow]:
        if record.definition_hash:
            return (
                record.workflow,
                record.definition_hash,
                self.engine.definition(record.definition_hash),
            )
        name, digest, definition, _pinned = self._workflow(record.workflow)
        return name, digest, definition

    def _workflow(self, workflow: str | Workflow | Path | None) -> tuple[str, str, Workflow, bool]:
        """(name, hash, definition, pinned): a file (`Path`) or model is pinned, a name (a
        string, never guessed to be a file) is not."""
        if workflow is None:
            raise _bad("a schedule needs a workflow (a registered name or a file)", "workflow")
        if isinstance(workflow, str):
            definition, digest = self.engine.named(workflow)
            return workflow, digest, definition, False
        definition, digest = self.engine.resolve(workflow)
        return definition.name, digest, definition, True

    def _spec(self, cron: str | None, every: Any, timezone: str | None, offset: Any) -> Spec:
        path = "cron" if cron else "every"
        try:
            spec = parse_spec(cron, every, timezone, offset)
        except ValueError as exc:
            raise _bad(str(exc), path) from None
        floor, why = self.engine.min_schedule_interval, "the store's minimum interval"
        rate = self.engine.quotas().max_schedule_rate
        if rate is not None and (rate <= 0 or 60.0 / rate > floor):
            floor = math.inf if rate <= 0 else 60.0 / rate
            why = f"tenant {self.engine.tenant!r}'s max-schedule-rate quota ({rate:g} per minute)"
        gap = _smallest_gap(spec, self.engine.clock.now())
        if gap < floor:
            shown = "no schedule" if math.isinf(floor) else f"at least {floor:g}s between fires"
            raise _bad(f"the schedule fires every {gap:g}s: {why} allows {shown}", path)
        return spec

    def _window(self, value: str | float) -> float:
        try:
            return parse_duration(value)
        except ValueError as exc:
            raise _bad(str(exc), "catchup_window") from None

    def _first_tick(self, record: ScheduleRecord, now: datetime) -> datetime | None:
        spec = spec_of(record)
        origin = now
        if record.start_at is not None and record.start_at > now:
            origin = record.start_at - timedelta(microseconds=1)
        try:
            tick = spec.next_after(origin)
        except (ValueError, OverflowError) as exc:  # past the end of representable time
            raise _bad(f"no tick can follow {origin.isoformat()}: {exc}", "start_at") from None
        if record.end_at is not None and tick > record.end_at:
            return None
        if record.remaining_actions == 0:
            return None
        return tick

    def _exists(self, execution_id: str) -> bool:
        """The tenant already has this tick's execution (a backfill or trigger started it,
        or someone chose its id): the tick is not started, nor counted, again."""
        return self.engine.store.load(execution_id, self.engine.tenant) is not None

    def _is_running(self, execution_id: str) -> bool:
        """The tick's execution still runs; one that continued as new runs as its chain
        until the chain's last run ends (its live run is found from the tick's id)."""
        found = self.engine.store.load(execution_id, self.engine.tenant)
        if found is not None and found.status == "continued":
            found = self.engine.live(execution_id)
        return found is not None and found.status == "running"

    def _change(
        self,
        schedule_id: str,
        action: str,
        fn: Callable[[ScheduleRecord, datetime], ScheduleRecord],
        details: dict[str, Any] | None = None,
    ) -> ScheduleRecord:
        for _ in range(20):
            record = self.get(schedule_id)
            now = self.engine.clock.now()
            updated = replace(fn(record, now), updated_at=now, version=record.version + 1)
            audit = self.engine.audit_entry(action, schedule_id, details)
            if self.store.update_schedule(ScheduleWrite(updated, record.version), audit=audit):
                return updated
        raise Conflict(f"schedule {schedule_id!r} kept changing; try again")


def _smallest_gap(spec: Spec, now: datetime) -> float:
    """The fewest seconds between two fires of `spec` (a cron's over its next 60 ticks)."""
    if isinstance(spec, IntervalSpec):
        return spec.every
    ticks = [spec.next_after(now)]
    for _ in range(60):
        ticks.append(spec.next_after(ticks[-1]))
    return min((b - a).total_seconds() for a, b in itertools.pairwise(ticks))


def _spec_dict(spec: Spec) -> dict[str, Any]:
    if isinstance(spec, CronSpec):
        return {"cron": spec.expression, "timezone": spec.timezone, "every": None, "offset": None}
    assert isinstance(spec, IntervalSpec)
    return {"cron": None, "timezone": None, "every": spec.every, "offset": spec.offset}
