"""Finding finished executions to purge, once for both SQL stores (the contract is
`wovyr.store.retention`); its SQL lives in `retention.sql`. Purging them is each store's
own (`SQLiteRetention`, `PostgresRetention`: PostgreSQL drops a month's partition of
events where it can)."""

from __future__ import annotations

from datetime import UTC, datetime

from wovyr.store.retention import Expired
from wovyr.store.sql import SQLRole

__all__ = ["SQLRetention"]

_FIRST_PAGE = (datetime.min.replace(tzinfo=UTC), "")  # before every (finished_at, id)


class SQLRetention(SQLRole):
    def find_expired(
        self,
        tenant: str,
        workflow: str | None,
        finished_before: datetime,
        limit: int,
        *,
        after: tuple[datetime, str] | None = None,
    ) -> list[Expired]:
        d = self._dialect
        after_at, after_id = after or _FIRST_PAGE
        sql = self._queries("retention")[
            "find_expired" if workflow is None else "find_expired_workflow"
        ]
        params = {"tenant": tenant, "workflow": workflow, "before": d.timestamp(finished_before)}
        params |= {"after_at": d.timestamp(after_at), "after_id": after_id, "limit": limit}
        rows = self._sql_read(sql, params)
        return [Expired(r["id"], r["workflow"], r["status"], d.time(r["updated_at"])) for r in rows]
