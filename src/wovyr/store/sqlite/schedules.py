"""The ScheduleStore half of the SQLite store (mixed into SQLiteStore)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any

from wovyr.store.base import DEFAULT_TENANT, NewExecution
from wovyr.store.codec import dumps, from_micros, loads, to_micros
from wovyr.store.hooks import Observers
from wovyr.store.schedules import ScheduleRecord

__all__ = ["SQLiteSchedules"]

_COLUMNS = (
    "tenant, id, workflow, definition_hash, input, spec, overlap, catchup_window, paused, note,"
    " start_at, end_at, remaining_actions, next_fire_at, last_fire_at, buffered, running, recent,"
    " fired_count, skipped_count, missed_count, created_at, updated_at, version"
)


def _t(value: datetime | None) -> int | None:
    return None if value is None else to_micros(value)


def _dt(value: int | None) -> datetime | None:
    return None if value is None else from_micros(value)


def _row(r: ScheduleRecord) -> tuple[Any, ...]:
    return (
        r.tenant,
        r.id,
        r.workflow,
        r.definition_hash,
        dumps(r.input),
        dumps(r.spec),
        r.overlap,
        r.catchup_window,
        int(r.paused),
        r.note,
        _t(r.start_at),
        _t(r.end_at),
        r.remaining_actions,
        _t(r.next_fire_at),
        _t(r.last_fire_at),
        dumps(list(r.buffered)),
        dumps(list(r.running)),
        dumps(list(r.recent)),
        r.fired_count,
        r.skipped_count,
        r.missed_count,
        to_micros(r.created_at),
        to_micros(r.updated_at),
        r.version,
    )


def _record(row: Sequence[Any]) -> ScheduleRecord:
    return ScheduleRecord(
        tenant=row[0],
        id=row[1],
        workflow=row[2],
        definition_hash=row[3],
        input=loads(row[4]),
        spec=loads(row[5]),
        overlap=row[6],
        catchup_window=row[7],
        paused=bool(row[8]),
        note=row[9],
        start_at=_dt(row[10]),
        end_at=_dt(row[11]),
        remaining_actions=row[12],
        next_fire_at=_dt(row[13]),
        last_fire_at=_dt(row[14]),
        buffered=tuple(loads(row[15])),
        running=tuple(loads(row[16])),
        recent=tuple(loads(row[17])),
        fired_count=row[18],
        skipped_count=row[19],
        missed_count=row[20],
        created_at=from_micros(row[21]),
        updated_at=from_micros(row[22]),
        version=row[23],
    )


class SQLiteSchedules:
    """Needs `_write()`, `_read()` and `_insert_execution()` from SQLiteStore."""

    _write: Callable[[], AbstractContextManager[sqlite3.Connection]]
    _read: Callable[..., list[Any]]
    _insert_execution: Callable[[sqlite3.Connection, NewExecution], bool]
    _observers: Observers

    def create_schedule(self, record: ScheduleRecord) -> bool:
        marks = ", ".join("?" * 24)
        with self._write() as conn:
            cur = conn.execute(
                f"INSERT OR IGNORE INTO schedules ({_COLUMNS}) VALUES ({marks})", _row(record)
            )
            return cur.rowcount == 1

    def get_schedule(self, schedule_id: str, tenant: str = DEFAULT_TENANT) -> ScheduleRecord | None:
        rows = self._read(
            f"SELECT {_COLUMNS} FROM schedules WHERE tenant = ? AND id = ?", (tenant, schedule_id)
        )
        return _record(rows[0]) if rows else None

    def list_schedules(self, tenant: str = DEFAULT_TENANT) -> list[ScheduleRecord]:
        rows = self._read(
            f"SELECT {_COLUMNS} FROM schedules WHERE tenant = ? ORDER BY id", (tenant,)
        )
        return [_record(r) for r in rows]

    def delete_schedule(self, schedule_id: str, tenant: str = DEFAULT_TENANT) -> bool:
        with self._write() as conn:
            cur = conn.execute(
                "DELETE FROM schedules WHERE tenant = ? AND id = ?", (tenant, schedule_id)
            )
            return cur.rowcount == 1

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
        return [_record(r) for r in rows]

    def update_schedule(
        self, record: ScheduleRecord, expected_version: int, starts: Sequence[NewExecution] = ()
    ) -> bool:
        assignments = ", ".join(f"{c.strip()} = ?" for c in _COLUMNS.split(",")[2:])
        with self._write() as conn:
            cur = conn.execute(
                f"UPDATE schedules SET {assignments} WHERE tenant = ? AND id = ? AND version = ?",
                (*_row(record)[2:], record.tenant, record.id, expected_version),
            )
            if cur.rowcount != 1:
                return False
            created = [new for new in starts if self._insert_execution(conn, new)]
        for new in created:
            self._observers.created(new)
        return True
