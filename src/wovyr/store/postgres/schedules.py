"""The ScheduleStore half of the PostgreSQL store (mixed into PostgresStore)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from wovyr.store.audit import AuditEntry
from wovyr.store.base import DEFAULT_TENANT, NewExecution
from wovyr.store.hooks import Observers
from wovyr.store.postgres.audit import append_audit_row
from wovyr.store.postgres.support import Connection
from wovyr.store.quotas import schedules_refused
from wovyr.store.rows import POSTGRES, schedule_params, schedule_record
from wovyr.store.schedules import ScheduleRecord

__all__ = ["PostgresSchedules"]


class PostgresSchedules:
    """Needs `_q`, `_write()`, `_read()` and `_insert_execution()` from PostgresStore."""

    _q: Mapping[str, str]
    _write: Callable[[Callable[[Connection], Any]], Any]
    _read: Callable[..., list[Any]]
    _insert_execution: Callable[[Connection, NewExecution], bool]
    _observers: Observers

    def create_schedule(
        self,
        record: ScheduleRecord,
        *,
        audit: AuditEntry | None = None,
        max_count: int | None = None,
    ) -> bool:
        sql, params = self._q["create_schedule"], schedule_params(record, POSTGRES)

        def body(conn: Connection) -> bool:
            if max_count is not None:  # the tenant's creates counted one after the other
                conn.execute(self._q["schedules_lock"], {"tenant": record.tenant})
                row = conn.execute(self._q["schedules_count"], {"tenant": record.tenant}).fetchone()
                if (int(row[0]) if row else 0) >= max_count:
                    raise schedules_refused(max_count)
            return _audited(conn, conn.execute(sql, params), audit)

        return bool(self._write(body))

    def get_schedule(self, schedule_id: str, tenant: str = DEFAULT_TENANT) -> ScheduleRecord | None:
        rows = self._read("get_schedule", {"tenant": tenant, "id": schedule_id}, named=True)
        return schedule_record(rows[0], POSTGRES) if rows else None

    def list_schedules(self, tenant: str = DEFAULT_TENANT) -> list[ScheduleRecord]:
        rows = self._read("list_schedules", {"tenant": tenant}, named=True)
        return [schedule_record(r, POSTGRES) for r in rows]

    def delete_schedule(
        self, schedule_id: str, tenant: str = DEFAULT_TENANT, *, audit: AuditEntry | None = None
    ) -> bool:
        sql, params = self._q["delete_schedule"], {"tenant": tenant, "id": schedule_id}
        return bool(self._write(lambda conn: _audited(conn, conn.execute(sql, params), audit)))

    def due_schedules(self, now: datetime, limit: int) -> list[ScheduleRecord]:
        rows = self._read("due_schedules", {"now": now, "limit": limit}, named=True)
        return [schedule_record(r, POSTGRES) for r in rows]

    def update_schedule(
        self,
        record: ScheduleRecord,
        expected_version: int,
        starts: Sequence[NewExecution] = (),
        *,
        audit: AuditEntry | None = None,
    ) -> bool:
        """Compare-and-set the schedule and create `starts` (known ids are ignored) in one
        transaction; False (nothing written) when the version moved."""
        params = {**schedule_params(record, POSTGRES), "expected_version": expected_version}

        def body(conn: Connection) -> list[NewExecution] | None:
            if conn.execute(self._q["update_schedule"], params).rowcount != 1:
                return None
            created = [new for new in starts if self._insert_execution(conn, new)]
            append_audit_row(conn, audit)
            return created

        created: list[NewExecution] | None = self._write(body)
        if created is None:
            return False
        for new in created:
            self._observers.created(new)
        return True


def _audited(conn: Connection, cursor: Any, audit: AuditEntry | None) -> bool:
    """Whether the statement of `cursor` changed one row; if it did, `audit` is appended."""
    if cursor.rowcount != 1:
        return False
    append_audit_row(conn, audit)
    return True
