"""Purging finished executions from the PostgreSQL store (mixed into PostgresStore; the
contract is `wovyr.store.retention`, finding them is shared: `wovyr.store.sql.retention`).
Its SQL lives in `retention.sql`.

Rows are deleted, except the events of a month whose last executions this purge removes:
that month's partition of events is detached and dropped instead, in the purge's own
transaction (`wovyr.store.postgres.partitions`; docs/operations.md "Retention")."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import cache
from importlib import resources
from typing import Any

from wovyr.store.audit import AuditEntry
from wovyr.store.postgres.audit import append_audit_row
from wovyr.store.postgres.partitions import drop_partition, lock_events
from wovyr.store.postgres.queries import parse_queries
from wovyr.store.postgres.support import Connection

__all__ = ["PostgresRetention", "retention_queries"]

_PURGE_STEPS = (  # after the events
    "purge_timers",
    "purge_labels",  # before the executions: it reads their labels
    "purge_flow_slots",
    "purge_activity_slots",
    "purge_executions",
)


@cache
def retention_queries() -> dict[str, str]:
    text = (resources.files("wovyr.store.postgres") / "retention.sql").read_text(encoding="utf-8")
    return parse_queries(text)


class PostgresRetention:
    """Purging (finding is shared: `wovyr.store.sql.retention`). Needs `_write()` from
    PostgresStore."""

    _write: Callable[[Callable[[Connection], Any]], Any]

    def purge_executions(
        self, tenant: str, ids: Sequence[str], *, audit: AuditEntry | None = None
    ) -> list[str]:
        q = retention_queries()
        wanted = list(dict.fromkeys(ids))
        if not wanted:
            return []

        def body(conn: Connection) -> set[str]:
            locked = conn.execute(q["purge_lock"], {"tenant": tenant, "ids": wanted}).fetchall()
            gone = [str(row[0]) for row in locked]
            if not gone:
                return set()
            params = {"tenant": tenant, "ids": gone}
            buckets = sorted({int(row[1]) for row in locked})
            dropping = _droppable(conn, params, buckets)
            kept = [b for b in buckets if b not in dropping]
            conn.execute(q["purge_events"], {**params, "buckets": kept})
            for name in _PURGE_STEPS:
                conn.execute(q[name], params)
            for bucket in dropping:
                if not drop_partition(conn, bucket):  # not empty after all: delete the rows
                    conn.execute(q["purge_events"], {**params, "buckets": [bucket]})
            append_audit_row(conn, audit)
            return set(gone)

        purged: set[str] = self._write(body)
        return [i for i in wanted if i in purged]


def _droppable(conn: Connection, params: dict[str, Any], buckets: list[int]) -> list[int]:
    """The buckets whose partitions this purge drops instead of deleting their rows: the
    ones it empties (of a past month), when the lock on events is had in time (taken
    BEFORE any events row is deleted, so the purge never upgrades a lock it holds)."""
    q = retention_queries()
    found = conn.execute(q["purge_droppable"], {**params, "buckets": buckets}).fetchall()
    dropping = [int(row[0]) for row in found]
    if dropping and not lock_events(conn):
        return []
    return dropping
