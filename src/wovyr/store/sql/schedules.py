"""The ScheduleStore half of both SQL stores (the contract is `wovyr.store.schedules`). Its
SQL lives in `schedules.sql`."""

from __future__ import annotations

from datetime import datetime

from wovyr.store.audit import AuditEntry
from wovyr.store.base import DEFAULT_TENANT, NewExecution
from wovyr.store.hooks import Observers
from wovyr.store.quotas import schedules_refused
from wovyr.store.rows import from_row, to_params
from wovyr.store.schedules import ScheduleRecord, ScheduleWrite
from wovyr.store.sql import Params, SQLRole, Tx

__all__ = ["SQLSchedules"]


class SQLSchedules(SQLRole):
    """Needs `_observers` from its store too."""

    _observers: Observers

    def _schedules(self, name: str, params: Params) -> list[ScheduleRecord]:
        rows = self._sql_read(self._queries("schedules")[name], params)
        return [from_row(ScheduleRecord, r, self._dialect) for r in rows]

    def create_schedule(
        self,
        record: ScheduleRecord,
        *,
        audit: AuditEntry | None = None,
        max_count: int | None = None,
    ) -> bool:
        q = self._queries("schedules")
        params = to_params(record, self._dialect)
        tenant = {"tenant": record.tenant}

        def body(tx: Tx) -> bool:
            if max_count is not None:  # the tenant's creates counted one after the other
                if "schedules_lock" in q:
                    tx.rows(q["schedules_lock"], tenant)
                if int(tx.rows(q["schedules_count"], tenant)[0]["n"]) >= max_count:
                    raise schedules_refused(max_count)
            return _audited(tx, tx.run(q["create_schedule"], params), audit)

        return bool(self._sql_write(body))

    def get_schedule(self, schedule_id: str, tenant: str = DEFAULT_TENANT) -> ScheduleRecord | None:
        found = self._schedules("get_schedule", {"tenant": tenant, "id": schedule_id})
        return found[0] if found else None

    def list_schedules(self, tenant: str = DEFAULT_TENANT) -> list[ScheduleRecord]:
        return self._schedules("list_schedules", {"tenant": tenant})

    def delete_schedule(
        self, schedule_id: str, tenant: str = DEFAULT_TENANT, *, audit: AuditEntry | None = None
    ) -> bool:
        sql = self._queries("schedules")["delete_schedule"]
        params = {"tenant": tenant, "id": schedule_id}
        return bool(self._sql_write(lambda tx: _audited(tx, tx.run(sql, params), audit)))

    def due_schedules(self, now: datetime, limit: int) -> list[ScheduleRecord]:
        return self._schedules(
            "due_schedules", {"now": self._dialect.timestamp(now), "limit": limit}
        )

    def update_schedule(self, write: ScheduleWrite, *, audit: AuditEntry | None = None) -> bool:
        """Compare-and-set the schedule and create `starts` (known ids are ignored) in one
        transaction; False (nothing written) when the version moved."""
        sql = self._queries("schedules")["update_schedule"]
        params = to_params(write.record, self._dialect)
        params["expected_version"] = write.expected_version

        def body(tx: Tx) -> list[NewExecution] | None:
            if tx.run(sql, params) != 1:
                return None
            created = [new for new in write.starts if tx.insert_execution(new)]
            tx.append_audit(audit)
            return created

        created: list[NewExecution] | None = self._sql_write(body)
        if created is None:
            return False
        for new in created:
            self._observers.created(new)
        return True


def _audited(tx: Tx, changed: int, audit: AuditEntry | None) -> bool:
    """Whether a statement changed one row (`changed`); if it did, `audit` is appended."""
    if changed != 1:
        return False
    tx.append_audit(audit)
    return True
