"""Appending to the audit chain of the PostgreSQL store (its reads are shared:
`wovyr.store.sql.audit`). Its SQL lives in `audit.sql`.

An append runs in the caller's transaction, after the change it records: it locks the one
row of `audit_head` (`FOR UPDATE`), so appenders of every server and CLI wait for each
other there and extend one chain; the head row moves with the insert and both commit (or
roll back) with the change. The lock is taken last in each transaction, so it adds no lock
cycle with the rows the change itself holds.
"""

from __future__ import annotations

from functools import cache
from importlib import resources

from wovyr.store.audit import AuditEntry, AuditRecord, next_record
from wovyr.store.codec import dumps
from wovyr.store.postgres.queries import parse_queries
from wovyr.store.postgres.support import Connection

__all__ = ["append_audit_row", "audit_head_lock_sql"]


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
