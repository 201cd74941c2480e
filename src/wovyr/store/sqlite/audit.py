"""The audit half of the SQLite store (mixed into SQLiteStore): the chain and its anchors.

An append runs inside the caller's `BEGIN IMMEDIATE` transaction, which holds the file's
write lock: no other connection, of this process or another, can append between reading
the head (the highest seq) and inserting the next record.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any

from wovyr.store.audit import GENESIS, AuditAnchor, AuditEntry, AuditRecord, next_record
from wovyr.store.codec import dumps, from_micros, loads, to_micros

__all__ = ["SQLiteAudit", "append_audit_row"]

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


def _record(row: Any) -> AuditRecord:
    return AuditRecord(
        seq=int(row[0]),
        at=from_micros(row[1]),
        tenant=row[2],
        actor=row[3],
        action=row[4],
        target=row[5],
        details=loads(row[6]),
        prev_hash=row[7],
        hash=row[8],
    )


class SQLiteAudit:
    """Needs `_write()` and `_read()` from SQLiteStore."""

    _write: Callable[[], AbstractContextManager[sqlite3.Connection]]
    _read: Callable[..., list[Any]]

    def append_audit(self, entry: AuditEntry) -> AuditRecord:
        with self._write() as conn:
            record = append_audit_row(conn, entry)
        assert record is not None
        return record

    def audit_head(self) -> AuditRecord | None:
        rows = self._read(f"SELECT {_COLUMNS} FROM audit_log ORDER BY seq DESC LIMIT 1")
        return _record(rows[0]) if rows else None

    def audit_records(
        self,
        *,
        after_seq: int = 0,
        limit: int = 1000,
        tenant: str | None = None,
        since: datetime | None = None,
    ) -> list[AuditRecord]:
        sql = f"SELECT {_COLUMNS} FROM audit_log WHERE seq > ?"
        params: list[Any] = [after_seq]
        if tenant is not None:
            sql += " AND tenant = ?"
            params.append(tenant)
        if since is not None:
            sql += " AND at >= ?"
            params.append(to_micros(since))
        sql += " ORDER BY seq LIMIT ?"
        params.append(limit)
        return [_record(r) for r in self._read(sql, params)]

    def add_audit_anchor(self, anchor: AuditAnchor) -> None:
        with self._write() as conn:
            conn.execute(
                "INSERT INTO audit_anchors (seq, hash, mac, at) VALUES (?, ?, ?, ?)",
                (anchor.seq, anchor.hash, anchor.mac, to_micros(anchor.at)),
            )

    def audit_anchors(self) -> list[AuditAnchor]:
        rows = self._read("SELECT seq, hash, mac, at FROM audit_anchors ORDER BY seq, at, id")
        return [AuditAnchor(int(r[0]), r[1], r[2], from_micros(r[3])) for r in rows]
