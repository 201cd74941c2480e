"""Finding finished executions to purge, once for both SQL stores (the contract is
`wovyr.store.retention`); its SQL lives in `retention.sql`. Purging them is each store's
own (`SQLiteRetention`, `PostgresRetention`: PostgreSQL drops a month's partition of
events where it can)."""

from __future__ import annotations

from datetime import UTC, datetime

from wovyr.store.retention import Expired, ExpiredFilter
from wovyr.store.sql import SQLRole

__all__ = ["SQLRetention"]

_FIRST_PAGE = (datetime.min.replace(tzinfo=UTC), "")  # before every (finished_at, id)


class SQLRetention(SQLRole):
    def find_expired(self, query: ExpiredFilter) -> list[Expired]:
        d, workflow = self._dialect, query.workflow
        after_at, after_id = query.after or _FIRST_PAGE
        sql = self._queries("retention")[
            "find_expired" if workflow is None else "find_expired_workflow"
        ]
        before = d.timestamp(query.finished_before)
        params = {"tenant": query.tenant, "workflow": workflow, "before": before}
        params |= {"after_at": d.timestamp(after_at), "after_id": after_id, "limit": query.limit}
        rows = self._sql_read(sql, params)
        return [Expired(r["id"], r["workflow"], r["status"], d.time(r["updated_at"])) for r in rows]
