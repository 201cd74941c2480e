"""Purging finished executions from the SQLite store (mixed into SQLiteStore; the contract
is `wovyr.store.retention`, finding them is shared: `wovyr.store.sql.retention`)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager

from wovyr.store.audit import AuditEntry
from wovyr.store.retention import FINISHED
from wovyr.store.sqlite.audit import append_audit_row

__all__ = ["SQLiteRetention"]

_CHUNK = 400  # ids per statement: below SQLite's default limit of bound parameters


class SQLiteRetention:
    """Purging (finding is shared: `wovyr.store.sql.retention`). Needs `_write()` from
    SQLiteStore."""

    _write: Callable[[], AbstractContextManager[sqlite3.Connection]]

    def purge_executions(
        self, tenant: str, ids: Sequence[str], *, audit: AuditEntry | None = None
    ) -> list[str]:
        wanted = list(dict.fromkeys(ids))
        purged: set[str] = set()
        with self._write() as conn:
            for start in range(0, len(wanted), _CHUNK):
                purged.update(_purge_chunk(conn, tenant, wanted[start : start + _CHUNK]))
            if purged:
                append_audit_row(conn, audit)
        return [i for i in wanted if i in purged]


def _purge_chunk(conn: sqlite3.Connection, tenant: str, ids: list[str]) -> list[str]:
    marks = ",".join("?" * len(ids))
    rows = conn.execute(
        f"SELECT id, labels, created_at FROM executions WHERE tenant = ? AND id IN ({marks})"
        f" AND status IN ({','.join('?' * len(FINISHED))})",
        [tenant, *ids, *FINISHED],
    ).fetchall()
    if not rows:
        return []
    keys = [(tenant, row[0]) for row in rows]
    gone = [row[0] for row in rows]
    gone_marks = ",".join("?" * len(gone))
    # Every per-execution table, each through its primary key (or, for the small
    # flow-control tables, one pass per chunk); stream chunks go with the execution row
    # (the trigger of 0025_stream_chunks.sql).
    conn.executemany("DELETE FROM events WHERE tenant = ? AND execution_id = ?", keys)
    conn.executemany("DELETE FROM timers WHERE tenant = ? AND execution_id = ?", keys)
    conn.executemany(
        "DELETE FROM execution_labels"
        " WHERE tenant = ? AND key = ? AND value = ? AND created_at = ? AND execution_id = ?",
        [
            (tenant, key, value, row[2], row[0])
            for row in rows
            if row[1]
            for key, value in json.loads(row[1]).items()
        ],
    )
    conn.execute(
        f"DELETE FROM flow_slots WHERE tenant = ? AND execution_id IN ({gone_marks})",
        [tenant, *gone],
    )
    conn.execute(
        f"DELETE FROM activity_slots WHERE tenant = ? AND execution_id IN ({gone_marks})",
        [tenant, *gone],
    )
    conn.executemany("DELETE FROM executions WHERE tenant = ? AND id = ?", keys)
    return [str(i) for i in gone]
