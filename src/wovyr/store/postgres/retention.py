"""Purging finished executions from the PostgreSQL store (mixed into PostgresStore; the
contract is `wovyr.store.retention`). Its SQL lives in `retention.sql`.

Rows are deleted (events included): the events table is not partitioned, see
docs/operations.md "Retention" for why and for the partitioned design."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from functools import cache
from importlib import resources
from typing import Any

from wovyr.store.audit import AuditEntry
from wovyr.store.postgres.audit import append_audit_row
from wovyr.store.postgres.queries import parse_queries
from wovyr.store.postgres.support import Connection
from wovyr.store.retention import Expired

__all__ = ["PostgresRetention", "retention_queries"]

_FIRST_PAGE = (datetime.min.replace(tzinfo=UTC), "")  # before every (finished_at, id)
_PURGE_STEPS = (
    "purge_events",
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
    """Needs `_write()` and `_run()` from PostgresStore."""

    _write: Callable[[Callable[[Connection], Any]], Any]
    _run: Callable[..., Any]

    def find_expired(
        self,
        tenant: str,
        workflow: str | None,
        finished_before: datetime,
        limit: int,
        *,
        after: tuple[datetime, str] | None = None,
    ) -> list[Expired]:
        q = retention_queries()
        after_at, after_id = after or _FIRST_PAGE
        sql = q["find_expired" if workflow is None else "find_expired_workflow"]
        params = {
            "tenant": tenant,
            "workflow": workflow,
            "before": finished_before,
            "after_at": after_at,
            "after_id": after_id,
            "limit": limit,
        }

        def body(conn: Connection) -> list[Any]:
            return conn.execute(sql, params).fetchall()

        rows: list[Any] = self._run(body, write=False)
        return [Expired(r[0], r[1], r[2], r[3]) for r in rows]

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
            for name in _PURGE_STEPS:
                conn.execute(q[name], params)
            append_audit_row(conn, audit)
            return set(gone)

        purged: set[str] = self._write(body)
        return [i for i in wanted if i in purged]
