"""The ScheduleStore half of the in-memory store (mixed into MemoryStore, which creates the
table)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from datetime import datetime

from wovyr.store.audit import AuditEntry, AuditRecord
from wovyr.store.base import DEFAULT_TENANT, NewExecution
from wovyr.store.hooks import Observers
from wovyr.store.quotas import schedules_refused
from wovyr.store.schedules import ScheduleRecord

__all__ = ["MemorySchedules"]


class MemorySchedules:
    _lock: threading.RLock
    _schedules: dict[tuple[str, str], ScheduleRecord]
    _observers: Observers
    _insert_execution: Callable[[NewExecution], bool]
    _check_quotas: Callable[..., None]
    _append_audit: Callable[[AuditEntry | None], AuditRecord | None]

    def create_schedule(
        self,
        record: ScheduleRecord,
        *,
        audit: AuditEntry | None = None,
        max_count: int | None = None,
    ) -> bool:
        with self._lock:
            table = self._schedules
            if max_count is not None and sum(t == record.tenant for t, _ in table) >= max_count:
                raise schedules_refused(max_count)
            if (record.tenant, record.id) in table:
                return False
            table[(record.tenant, record.id)] = record
            self._append_audit(audit)
            return True

    def get_schedule(self, schedule_id: str, tenant: str = DEFAULT_TENANT) -> ScheduleRecord | None:
        with self._lock:
            return self._schedules.get((tenant, schedule_id))

    def list_schedules(self, tenant: str = DEFAULT_TENANT) -> list[ScheduleRecord]:
        with self._lock:
            return sorted(
                (r for (t, _), r in self._schedules.items() if t == tenant),
                key=lambda r: r.id,
            )

    def delete_schedule(
        self, schedule_id: str, tenant: str = DEFAULT_TENANT, *, audit: AuditEntry | None = None
    ) -> bool:
        with self._lock:
            if self._schedules.pop((tenant, schedule_id), None) is None:
                return False
            self._append_audit(audit)
            return True

    def due_schedules(self, now: datetime, limit: int) -> list[ScheduleRecord]:
        with self._lock:
            due = [
                r
                for r in self._schedules.values()
                if (r.next_fire_at is not None and r.next_fire_at <= now)
                or (r.buffered and not r.paused)
            ]
        return sorted(due, key=lambda r: r.next_fire_at or now)[:limit]

    def update_schedule(
        self,
        record: ScheduleRecord,
        expected_version: int,
        starts: Sequence[NewExecution] = (),
        *,
        audit: AuditEntry | None = None,
    ) -> bool:
        with self._lock:
            table = self._schedules
            current = table.get((record.tenant, record.id))
            if current is None or current.version != expected_version:
                return False
            self._check_quotas(*starts)  # all or nothing, as one SQL transaction
            table[(record.tenant, record.id)] = record
            created = [new for new in starts if self._insert_execution(new)]
            self._append_audit(audit)
        for new in created:
            self._observers.created(new)
        return True
