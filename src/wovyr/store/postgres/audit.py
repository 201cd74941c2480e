"""The audit half of the PostgreSQL store (mixed into PostgresStore). Its SQL lives in
`audit.sql`.

An append runs in the caller's transaction, after the change it records: it locks the one
row of `audit_head` (`FOR UPDATE`), so appenders of every server and CLI wait for each
other there and extend one chain; the head row moves with the insert and both commit (or
roll back) with the change. The lock is taken last in each transaction, so it adds no lock
cycle with the rows the change itself holds.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from functools import cache
from importlib import resources
from typing import Any

from wovyr.store.audit import AuditAnchor, AuditEntry, AuditRecord, next_record
from wovyr.store.codec import dumps
from wovyr.store.postgres.queries import parse_queries
from wovyr.store.postgres.support import Connection

__all__ = ["PostgresAudit", "append_audit_row", "audit_head_lock_sql"]


@cache
def _queries() -> dict[str, str]:
    text = (resources.files("wovyr.store.postgres") / "audit.sql").read_text(encoding="utf-8")
    return parse_queries(text)


def audit_head_lock_sql() -> str:
    """The statement that locks the chain's head and reads its (seq, hash)."""
    return _queries()["audit_head_lock"]


def append_audit_row(
    conn: Connection, entry: AuditEntry | None, *, head: tuple[int, str] | None = None
) -> AuditRecord | None:
    """Append `entry` (if any) in the transaction open on `conn`; `head`: the (seq, hash)
    the caller already read with `audit_head_lock_sql()` in this transaction."""
    if entry is None:
        return None
    q = _queries()
    if head is None:
        top = conn.execute(q["audit_head_lock"]).fetchone()
        assert top is not None  # the migration inserts the one head row
        head = (int(top[0]), top[1])
    record = next_record(entry, *head)
    conn.execute(
        q["audit_insert"],
        {
            "seq": record.seq,
            "at": record.at,
            "tenant": record.tenant,
            "actor": record.actor,
            "action": record.action,
            "target": record.target,
            "details": dumps(record.details),
            "prev_hash": record.prev_hash,
            "hash": record.hash,
        },
    )
    return record


def _record(r: Any) -> AuditRecord:
    return AuditRecord(int(r[0]), r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8])


class PostgresAudit:
    """Needs `_write()` and `_run()` from PostgresStore."""

    _write: Callable[[Callable[[Connection], Any]], Any]
    _run: Callable[..., Any]

    def append_audit(self, entry: AuditEntry) -> AuditRecord:
        record: AuditRecord = self._write(lambda conn: append_audit_row(conn, entry))
        return record

    def audit_head(self) -> AuditRecord | None:
        sql = _queries()["audit_last"]
        rows: list[Any] = self._run(lambda conn: conn.execute(sql).fetchall(), write=False)
        return _record(rows[0]) if rows else None

    def audit_records(
        self,
        *,
        after_seq: int = 0,
        limit: int = 1000,
        tenant: str | None = None,
        since: datetime | None = None,
    ) -> list[AuditRecord]:
        sql = _queries()["audit_list"]
        params = {"after_seq": after_seq, "limit": limit, "tenant": tenant, "since": since}
        rows: list[Any] = self._run(lambda conn: conn.execute(sql, params).fetchall(), write=False)
        return [_record(r) for r in rows]

    def add_audit_anchor(self, anchor: AuditAnchor) -> None:
        sql = _queries()["audit_anchor_insert"]
        params = {"seq": anchor.seq, "hash": anchor.hash, "mac": anchor.mac, "at": anchor.at}
        self._write(lambda conn: conn.execute(sql, params))

    def audit_anchors(self) -> list[AuditAnchor]:
        sql = _queries()["audit_anchor_list"]
        rows: list[Any] = self._run(lambda conn: conn.execute(sql).fetchall(), write=False)
        return [AuditAnchor(int(r[0]), r[1], r[2], r[3]) for r in rows]
