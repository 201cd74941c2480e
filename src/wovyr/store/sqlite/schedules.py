"""The ScheduleStore half of the SQLite store (mixed into SQLiteStore)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any

from wovyr.store.audit import AuditEntry
from wovyr.store.base import DEFAULT_TENANT, NewExecution
from wovyr.store.codec import to_micros
from wovyr.store.hooks import Observers
from wovyr.store.quotas import schedules_refused
from wovyr.store.rows import SQLITE, schedule_params, schedule_record
from wovyr.store.schedules import ScheduleRecord
from wovyr.store.sqlite.audit import append_audit_row

__all__ = ["SQLiteSchedules"]

_COLUMNS = (
    "tenant, id, workflow, definition_hash, input, spec, overlap, catchup_window, paused, note,"
    " start_at, end_at, remaining_actions, next_fire_at, last_fire_at, buffered, running, recent,"
    " fired_count, skipped_count, missed_count, created_at, updated_at, version"
)
_NAMES = [c.strip() for c in _COLUMNS.split(",")]
_INSERT = (
    f"INSERT OR IGNORE INTO schedules ({_COLUMNS}) VALUES ({', '.join(f':{c}' for c in _NAMES)})"
)
_UPDATE = (
    f"UPDATE schedules SET {', '.join(f'{c} = :{c}' for c in _NAMES[2:])}"
    " WHERE tenant = :tenant AND id = :id AND version = :expected_version"
)


class SQLiteSchedules:
    """Needs `_write()`, `_read()` and `_insert_execution()` from SQLiteStore."""

    _write: Callable[[], AbstractContextManager[sqlite3.Connection]]
    _read: Callable[..., list[Any]]
    _insert_execution: Callable[[sqlite3.Connection, NewExecution], bool]
    _observers: Observers

    def create_schedule(
        self,
        record: ScheduleRecord,
        *,
        audit: AuditEntry | None = None,
        max_count: int | None = None,
    ) -> bool:
        with self._write() as conn:  # BEGIN IMMEDIATE: the count cannot race
            if max_count is not None:
                row = conn.execute(
                    "SELECT count(*) FROM schedules WHERE tenant = ?", (record.tenant,)
                ).fetchone()
                if int(row[0]) >= max_count:
                    raise schedules_refused(max_count)
            if conn.execute(_INSERT, schedule_params(record, SQLITE)).rowcount != 1:
                return False
            append_audit_row(conn, audit)
            return True

    def get_schedule(self, schedule_id: str, tenant: str = DEFAULT_TENANT) -> ScheduleRecord | None:
        rows = self._read(
            f"SELECT {_COLUMNS} FROM schedules WHERE tenant = ? AND id = ?", (tenant, schedule_id)
        )
        return schedule_record(rows[0], SQLITE) if rows else None

    def list_schedules(self, tenant: str = DEFAULT_TENANT) -> list[ScheduleRecord]:
        rows = self._read(
            f"SELECT {_COLUMNS} FROM schedules WHERE tenant = ? ORDER BY id", (tenant,)
        )
        return [schedule_record(r, SQLITE) for r in rows]

    def delete_schedule(
        self, schedule_id: str, tenant: str = DEFAULT_TENANT, *, audit: AuditEntry | None = None
    ) -> bool:
        with self._write() as conn:
            cur = conn.execute(
                "DELETE FROM schedules WHERE tenant = ? AND id = ?", (tenant, schedule_id)
            )
            if cur.rowcount != 1:
                return False
            append_audit_row(conn, audit)
            return True

    def due_schedules(self, now: datetime, limit: int) -> list[ScheduleRecord]:
        rows = self._read(
            f"SELECT {_COLUMNS} FROM schedules WHERE next_fire_at IS NOT NULL"
            " AND next_fire_at <= ? ORDER BY next_fire_at LIMIT ?",
            (to_micros(now), limit),
        )
        rows += self._read(  # waiting for a running execution to end before the buffered tick
            f"SELECT {_COLUMNS} FROM schedules WHERE buffered != '[]' AND paused = 0"
            " AND NOT (next_fire_at IS NOT NULL AND next_fire_at <= ?) LIMIT ?",
            (to_micros(now), limit),
        )
        return [schedule_record(r, SQLITE) for r in rows]

    def update_schedule(
        self,
        record: ScheduleRecord,
        expected_version: int,
        starts: Sequence[NewExecution] = (),
        *,
        audit: AuditEntry | None = None,
    ) -> bool:
        params = {**schedule_params(record, SQLITE), "expected_version": expected_version}
        with self._write() as conn:
            if conn.execute(_UPDATE, params).rowcount != 1:
                return False
            created = [new for new in starts if self._insert_execution(conn, new)]
            append_audit_row(conn, audit)
        for new in created:
            self._observers.created(new)
        return True
