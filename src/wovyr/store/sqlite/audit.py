"""Appending to the audit chain of the SQLite store (its reads are shared:
`wovyr.store.sql.audit`).

An append runs inside the caller's `BEGIN IMMEDIATE` transaction, which holds the file's
write lock: no other connection, of this process or another, can append between reading
the head (the highest seq) and inserting the next record.
"""

from __future__ import annotations

import sqlite3

from wovyr.store.audit import GENESIS, AuditEntry, AuditRecord, next_record
from wovyr.store.codec import dumps, to_micros

__all__ = ["append_audit_row"]

_COLUMNS = "seq, at, tenant, actor, action, target, details, prev_hash, hash"


def append_audit_row(conn: sqlite3.Connection, entry: AuditEntry | None) -> AuditRecord | None:
    """Append `entry` (if any) in the transaction open on `conn`."""
    if entry is None:
        return None
    row = conn.execute("SELECT seq, hash FROM audit_log ORDER BY seq DESC LIMIT 1").fetchone()
    record = next_record(entry, row[0], row[1]) if row else next_record(entry, 0, GENESIS)
    conn.execute(
        f"INSERT INTO audit_log ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            record.seq,
            to_micros(record.at),
            record.tenant,
            record.actor,
            record.action,
            record.target,
            dumps(record.details),
            record.prev_hash,
            record.hash,
        ),
    )
    return record
