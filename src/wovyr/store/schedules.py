"""Schedule records and the ScheduleStore contract.

A schedule row carries its own `version`; every change is a compare-and-set on it, and a
fire writes the executions it starts in the same transaction, so a tick starts exactly one
execution even with several dispatchers or a crash in the middle of a fire.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import field
from datetime import datetime
from typing import Any, Protocol

from wovyr.store.audit import AuditEntry
from wovyr.store.frozen import record
from wovyr.store.records import DEFAULT_TENANT, NewExecution

__all__ = ["ScheduleRecord", "ScheduleStore", "ScheduleWrite"]


@record
class ScheduleRecord:
    id: str
    workflow: str
    spec: dict[str, Any]  # {"cron", "every", "timezone", "offset"}
    created_at: datetime
    updated_at: datetime
    tenant: str = DEFAULT_TENANT
    definition_hash: str | None = None  # pinned (from a file) or None: latest by name
    input: dict[str, Any] = field(default_factory=dict)
    overlap: str = "skip"
    catchup_window: float = 60.0
    paused: bool = False
    note: str | None = None
    start_at: datetime | None = None
    end_at: datetime | None = None
    remaining_actions: int | None = None
    next_fire_at: datetime | None = None
    last_fire_at: datetime | None = None
    buffered: tuple[str, ...] = ()  # ISO tick times waiting for a running execution to end
    running: tuple[str, ...] = ()  # executions started by this schedule, maybe still running
    recent: tuple[dict[str, Any], ...] = ()  # the last fires: {tick, execution_id, started_at}
    fired_count: int = 0
    skipped_count: int = 0
    missed_count: int = 0
    version: int = 0


@record
class ScheduleWrite:
    """A compare-and-set of a schedule: `record` replaces the version `expected_version`
    (its own version must be one more) and `starts` are created with it."""

    record: ScheduleRecord
    expected_version: int
    starts: Sequence[NewExecution] = ()


class ScheduleStore(Protocol):
    def create_schedule(
        self,
        record: ScheduleRecord,
        *,
        audit: AuditEntry | None = None,
        max_count: int | None = None,
    ) -> bool:
        """Insert; False when the id exists for that tenant. `audit` (here and below) is
        appended to the audit chain in the same transaction, when the write applies. With
        `max_count` (the tenant's `max_schedules` quota), a tenant that has that many
        schedules already is refused (`QuotaExceeded`, nothing written): the count and the
        insert are one transaction, so two creates never both take the last one."""
        ...

    def get_schedule(
        self, schedule_id: str, tenant: str = DEFAULT_TENANT
    ) -> ScheduleRecord | None: ...

    def list_schedules(self, tenant: str = DEFAULT_TENANT) -> list[ScheduleRecord]: ...

    def delete_schedule(
        self, schedule_id: str, tenant: str = DEFAULT_TENANT, *, audit: AuditEntry | None = None
    ) -> bool: ...

    def due_schedules(self, now: datetime, limit: int) -> list[ScheduleRecord]: ...

    def update_schedule(self, write: ScheduleWrite, *, audit: AuditEntry | None = None) -> bool:
        """Write `write.record` and create its `starts` (ignoring ids that exist) in one
        transaction; False if the version moved."""
        ...
