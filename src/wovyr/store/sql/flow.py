"""Flow control's rate-limit buckets and the keys in use, once for both SQL stores (the
contract is `wovyr.store.flow`); its SQL lives in `flow.sql`. Taking units and slots
(`acquire_flows`) is each store's own: SQLite's one writer against PostgreSQL's row and
advisory locks (`SQLiteRateLimits`, `PostgresRateLimits`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime

from wovyr.store.audit import AuditEntry
from wovyr.store.flow import (
    FlowAcquire,
    FlowAnswer,
    FlowKey,
    NewRateLimit,
    RateLimitRecord,
)
from wovyr.store.rows import to_params
from wovyr.store.sql import SQLRole, Tx

__all__ = ["SQLFlow"]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class SQLFlow(SQLRole):
    """Needs `acquire_flows` from its store."""

    acquire_flows: Callable[[Sequence[FlowAcquire]], list[FlowAnswer]]

    def acquire_flow(self, ask: FlowAcquire) -> FlowAnswer:
        return self.acquire_flows([ask])[0]

    def flow_keys(self, tenant: str, now: datetime) -> list[FlowKey]:
        sql = self._queries("flow")["flow_keys"]
        rows = self._sql_read(sql, {"tenant": tenant, "now": self._lease_now(now)})
        return [FlowKey(r["kind"], r["key"], int(r["running"]), int(r["waiting"])) for r in rows]

    def activity_slot_holders(self, tenant: str, key: str, now: datetime) -> list[str]:
        sql = self._queries("flow")["activity_holders_now"]
        params = {"tenant": tenant, "key": key, "now": self._lease_now(now)}
        return [r["holder"] for r in self._sql_read(sql, params)]

    def set_rate_limit(
        self, limit: NewRateLimit, *, audit: AuditEntry | None = None
    ) -> RateLimitRecord:
        sql = self._queries("flow")["bucket_declare"]
        params = to_params(limit, self._dialect)

        def body(tx: Tx) -> None:
            tx.run(sql, params)
            tx.append_audit(audit)

        self._sql_write(body)
        return next(r for r in self.rate_limits(limit.tenant) if r.key == limit.key)

    def rate_limits(self, tenant: str) -> list[RateLimitRecord]:
        d = self._dialect
        rows = self._sql_read(self._queries("flow")["buckets_list"], {"tenant": tenant})
        return [
            RateLimitRecord(
                tenant, r["key"], float(r["capacity"]), float(r["per_second"]), float(r["tokens"]),
                bool(r["declared"]), r["updated_by"],
                (d.time(r["refilled_at"]) - _EPOCH).total_seconds(),
            )
            for r in rows
        ]  # fmt: skip

    def delete_rate_limit(self, tenant: str, key: str, *, audit: AuditEntry | None = None) -> bool:
        sql = self._queries("flow")["bucket_delete"]

        def body(tx: Tx) -> bool:
            deleted = tx.run(sql, {"tenant": tenant, "key": key}) > 0
            if deleted:
                tx.append_audit(audit)
            return deleted

        return bool(self._sql_write(body))
