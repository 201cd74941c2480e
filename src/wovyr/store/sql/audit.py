"""The audit half of both SQL stores (the contract is `wovyr.store.audit`). Its SQL lives in
`audit.sql`; an append goes through the store's own `append_audit_row` (`Tx.append_audit`),
in the caller's transaction."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from wovyr.store.audit import AuditAnchor, AuditEntry, AuditRecord
from wovyr.store.rows import Dialect, Row
from wovyr.store.sql import SQLRole

__all__ = ["SQLAudit"]


class SQLAudit(SQLRole):
    def append_audit(self, entry: AuditEntry) -> AuditRecord:
        record: AuditRecord | None = self._sql_write(lambda tx: tx.append_audit(entry))
        assert record is not None
        return record

    def audit_head(self) -> AuditRecord | None:
        rows = self._sql_read(self._queries("audit")["audit_last"], {})
        return _record(rows[0], self._dialect) if rows else None

    def audit_records(
        self,
        *,
        after_seq: int = 0,
        limit: int = 1000,
        tenant: str | None = None,
        since: datetime | None = None,
    ) -> list[AuditRecord]:
        d = self._dialect
        params: dict[str, Any] = {"after_seq": after_seq, "limit": limit}
        more = ""  # a filter only when asked: SQLite then walks its (tenant, seq) index
        if tenant is not None:
            more += " AND tenant = :tenant"
            params["tenant"] = tenant
        if since is not None:
            more += " AND at >= :since"
            params["since"] = d.timestamp(since)
        sql = self._queries("audit")["audit_list"] + d.params(f"{more} ORDER BY seq LIMIT :limit")
        rows = self._sql_read(sql, params)
        return [_record(r, d) for r in rows]

    def add_audit_anchor(self, anchor: AuditAnchor) -> None:
        sql = self._queries("audit")["audit_anchor_insert"]
        params = {
            "seq": anchor.seq,
            "hash": anchor.hash,
            "mac": anchor.mac,
            "at": self._dialect.timestamp(anchor.at),
        }
        self._sql_write(lambda tx: tx.run(sql, params))

    def audit_anchors(self) -> list[AuditAnchor]:
        d = self._dialect
        rows = self._sql_read(self._queries("audit")["audit_anchor_list"], {})
        return [AuditAnchor(int(r["seq"]), r["hash"], r["mac"], d.time(r["at"])) for r in rows]


def _record(r: Row, d: Dialect) -> AuditRecord:
    return AuditRecord(
        seq=int(r["seq"]),
        at=d.time(r["at"]),
        tenant=r["tenant"],
        actor=r["actor"],
        action=r["action"],
        target=r["target"],
        details=d.json(r["details"]),
        prev_hash=r["prev_hash"],
        hash=r["hash"],
    )
