"""The ScheduleStore half of the PostgreSQL store (mixed into PostgresStore)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, TypeVar

import psycopg

from wovyr.store.base import DEFAULT_TENANT, NewExecution
from wovyr.store.codec import dumps
from wovyr.store.hooks import Observers
from wovyr.store.schedules import ScheduleRecord

__all__ = ["PostgresSchedules"]

T = TypeVar("T")
Connection = psycopg.Connection[Any]


def _params(r: ScheduleRecord) -> dict[str, Any]:
    return {
        "tenant": r.tenant,
        "id": r.id,
        "workflow": r.workflow,
        "definition_hash": r.definition_hash,
        "input": dumps(r.input),
        "spec": dumps(r.spec),
        "overlap": r.overlap,
        "catchup_window": r.catchup_window,
        "paused": r.paused,
        "note": r.note,
        "start_at": r.start_at,
        "end_at": r.end_at,
        "remaining_actions": r.remaining_actions,
        "next_fire_at": r.next_fire_at,
        "last_fire_at": r.last_fire_at,
        "buffered": dumps(list(r.buffered)),
        "running": dumps(list(r.running)),
        "recent": dumps(list(r.recent)),
        "fired_count": r.fired_count,
        "skipped_count": r.skipped_count,
        "missed_count": r.missed_count,
        "created_at": r.created_at,
        "updated_at": r.updated_at,
        "version": r.version,
    }


def _dt(value: datetime | None) -> datetime | None:
    return None if value is None else value.astimezone(UTC)


def _record(row: Sequence[Any]) -> ScheduleRecord:
    return ScheduleRecord(
        tenant=row[0],
        id=row[1],
        workflow=row[2],
        definition_hash=row[3],
        input=row[4],
        spec=row[5],
        overlap=row[6],
        catchup_window=row[7],
        paused=row[8],
        note=row[9],
        start_at=_dt(row[10]),
        end_at=_dt(row[11]),
        remaining_actions=row[12],
        next_fire_at=_dt(row[13]),
        last_fire_at=_dt(row[14]),
        buffered=tuple(row[15]),
        running=tuple(row[16]),
        recent=tuple(row[17]),
        fired_count=row[18],
        skipped_count=row[19],
        missed_count=row[20],
        created_at=row[21].astimezone(UTC),
        updated_at=row[22].astimezone(UTC),
        version=row[23],
    )


class PostgresSchedules:
    """Needs `_q`, `_write()`, `_read()` and `_insert_execution()` from PostgresStore."""

    _q: Mapping[str, str]
    _write: Callable[[Callable[[Connection], Any]], Any]
    _read: Callable[..., list[Any]]
    _insert_execution: Callable[[Connection, NewExecution], bool]
    _observers: Observers

    def create_schedule(self, record: ScheduleRecord) -> bool:
        sql, params = self._q["create_schedule"], _params(record)
        return bool(self._write(lambda conn: conn.execute(sql, params).rowcount == 1))

    def get_schedule(self, schedule_id: str, tenant: str = DEFAULT_TENANT) -> ScheduleRecord | None:
        rows = self._read("get_schedule", {"tenant": tenant, "id": schedule_id})
        return _record(rows[0]) if rows else None

    def list_schedules(self, tenant: str = DEFAULT_TENANT) -> list[ScheduleRecord]:
        return [_record(r) for r in self._read("list_schedules", {"tenant": tenant})]

    def delete_schedule(self, schedule_id: str, tenant: str = DEFAULT_TENANT) -> bool:
        sql, params = self._q["delete_schedule"], {"tenant": tenant, "id": schedule_id}
        return bool(self._write(lambda conn: conn.execute(sql, params).rowcount == 1))

    def due_schedules(self, now: datetime, limit: int) -> list[ScheduleRecord]:
        return [_record(r) for r in self._read("due_schedules", {"now": now, "limit": limit})]

    def update_schedule(
        self, record: ScheduleRecord, expected_version: int, starts: Sequence[NewExecution] = ()
    ) -> bool:
        """Compare-and-set the schedule and create `starts` (known ids are ignored) in one
        transaction; False (nothing written) when the version moved."""
        params = {**_params(record), "expected_version": expected_version}

        def body(conn: Connection) -> list[NewExecution] | None:
            if conn.execute(self._q["update_schedule"], params).rowcount != 1:
                return None
            return [new for new in starts if self._insert_execution(conn, new)]

        created: list[NewExecution] | None = self._write(body)
        if created is None:
            return False
        for new in created:
            self._observers.created(new)
        return True
