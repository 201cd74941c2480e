"""Agent memory of the SQLite store (mixed into SQLiteStore); see `wovyr.store.agent_memory`."""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from datetime import datetime, timedelta
from typing import Any, Literal

from wovyr.store.agent_memory import (
    WRITE_ID_DAYS,
    MemoryItem,
    MemoryPut,
    MemoryWriteResult,
    VectorColumns,
)
from wovyr.store.audit import AuditEntry
from wovyr.store.codec import dumps, from_micros, loads, to_micros
from wovyr.store.sqlite.audit import append_audit_row
from wovyr.store.vectors import VectorSearch

__all__ = ["SQLiteAgentMemory"]

_ITEM = (
    "SELECT tenant, namespace, key, value, text, embedding_model, version, updated_at,"
    " expires_at FROM memory_items"
)
_LIVE = "(expires_at IS NULL OR expires_at > ?)"


def _item(row: Any) -> MemoryItem:
    return MemoryItem(
        str(row[0]),
        str(row[1]),
        str(row[2]),
        loads(row[3]),
        row[4],
        row[5],
        int(row[6]),
        from_micros(row[7]),
        None if row[8] is None else from_micros(row[8]),
    )


class SQLiteAgentMemory(VectorSearch):
    """Needs `_write()` and `_read()` from SQLiteStore."""

    _write: Callable[[], AbstractContextManager[sqlite3.Connection]]
    _read: Callable[..., list[Any]]

    def put_memory(
        self, put: MemoryPut, now: datetime, *, audit: AuditEntry | None = None
    ) -> MemoryWriteResult:
        value = dumps(put.value)
        micros = to_micros(now)
        model = put.embedding_model if put.embedding is not None else None
        expires = None if put.expires_at is None else to_micros(put.expires_at)
        with self._write() as conn:
            replayed = _replayed(conn, put.tenant, put.write_id, micros)
            if replayed is not None:
                return replayed
            seq = _bump(conn, put.tenant, put.namespace)
            row = conn.execute(
                "SELECT version FROM memory_items WHERE tenant = ? AND namespace = ? AND key = ?"
                f" AND {_LIVE}",
                (put.tenant, put.namespace, put.key, micros),
            ).fetchone()
            version = 1 if row is None else int(row[0]) + 1
            conn.execute(
                "INSERT OR REPLACE INTO memory_items (tenant, namespace, key, value, text,"
                " embedding, embedding_model, version, seq, updated_at, expires_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    put.tenant,
                    put.namespace,
                    put.key,
                    value,
                    put.text,
                    put.embedding,
                    model,
                    version,
                    seq,
                    micros,
                    expires,
                ),
            )
            result = MemoryWriteResult("put", put.key, version, row is not None)
            append_audit_row(conn, audit)
            _written(conn, put.tenant, put.namespace, put.write_id, result, micros)
            return result

    def delete_memory(
        self,
        tenant: str,
        namespace: str,
        key: str,
        now: datetime,
        write_id: str | None = None,
        *,
        audit: AuditEntry | None = None,
    ) -> MemoryWriteResult:
        micros = to_micros(now)
        with self._write() as conn:
            replayed = _replayed(conn, tenant, write_id, micros)
            if replayed is not None:
                return replayed
            _bump(conn, tenant, namespace)
            row = conn.execute(
                "DELETE FROM memory_items WHERE tenant = ? AND namespace = ? AND key = ?"
                " RETURNING expires_at",
                (tenant, namespace, key),
            ).fetchone()
            existed = row is not None and (row[0] is None or int(row[0]) > micros)
            if row is not None:  # a row left: a cached matrix must drop it (a rebuild)
                conn.execute(
                    "UPDATE memory_namespaces SET deletes = deletes + 1"
                    " WHERE tenant = ? AND namespace = ?",
                    (tenant, namespace),
                )
            result = MemoryWriteResult("delete", key, 0, existed)
            if existed:
                append_audit_row(conn, audit)
            _written(conn, tenant, namespace, write_id, result, micros)
            return result

    def get_memory(
        self, tenant: str, namespace: str, keys: Sequence[str], now: datetime
    ) -> list[MemoryItem]:
        if not keys:
            return []
        found: dict[str, MemoryItem] = {}
        for start in range(0, len(keys), 500):
            chunk = list(keys[start : start + 500])
            marks = ", ".join("?" * len(chunk))
            rows = self._read(
                f"{_ITEM} WHERE tenant = ? AND namespace = ? AND key IN ({marks}) AND {_LIVE}",
                (tenant, namespace, *chunk, to_micros(now)),
            )
            found.update((str(r[2]), _item(r)) for r in rows)
        return [found[k] for k in keys if k in found]

    def list_memory(
        self,
        tenant: str,
        namespace: str,
        now: datetime,
        *,
        prefix: str = "",
        after: str = "",
        limit: int = 100,
    ) -> list[MemoryItem]:
        rows = self._read(
            f"{_ITEM} WHERE tenant = ? AND namespace = ? AND key > ?"
            f" AND substr(key, 1, length(?)) = ? AND {_LIVE} ORDER BY key LIMIT ?",
            (tenant, namespace, after, prefix, prefix, to_micros(now), limit),
        )
        return [_item(r) for r in rows]

    def memory_marks(self, tenant: str, namespace: str) -> tuple[int, int]:
        rows = self._read(
            "SELECT version, deletes FROM memory_namespaces WHERE tenant = ? AND namespace = ?",
            (tenant, namespace),
        )
        return (int(rows[0][0]), int(rows[0][1])) if rows else (0, 0)

    def memory_vectors(
        self, tenant: str, namespace: str, model: str, after: int = 0
    ) -> VectorColumns:
        if after:
            rows = self._read(
                "SELECT key, CASE WHEN embedding_model = ? THEN embedding END, expires_at"
                " FROM memory_items WHERE tenant = ? AND namespace = ? AND seq > ?",
                (model, tenant, namespace, after),
            )
        else:
            rows = self._read(
                "SELECT key, embedding, expires_at FROM memory_items"
                " WHERE tenant = ? AND namespace = ? AND embedding_model = ?"
                " AND embedding IS NOT NULL",
                (tenant, namespace, model),
            )
        if not rows:
            return VectorColumns([], [], [])
        keys, blobs, expires = zip(*rows, strict=True)
        return VectorColumns(
            list(keys), list(blobs), [math.inf if e is None else e / 1e6 for e in expires]
        )


def _bump(conn: sqlite3.Connection, tenant: str, namespace: str) -> int:
    """Bump the namespace's version (first in a write: what its item's `seq` is)."""
    row = conn.execute(
        "INSERT INTO memory_namespaces (tenant, namespace, version) VALUES (?, ?, 1)"
        " ON CONFLICT (tenant, namespace) DO UPDATE SET version = version + 1"
        " RETURNING version",
        (tenant, namespace),
    ).fetchone()
    return int(row[0])


def _replayed(
    conn: sqlite3.Connection, tenant: str, write_id: str | None, micros: int
) -> MemoryWriteResult | None:
    """What the write of `write_id` did, when it is recorded (then nothing is written)."""
    if write_id is None:
        return None
    row = conn.execute(
        "SELECT op, key, version, existed FROM memory_writes WHERE tenant = ? AND write_id = ?",
        (tenant, write_id),
    ).fetchone()
    if row is None:
        return None
    op: Literal["put", "delete"] = "put" if row[0] == "put" else "delete"
    return MemoryWriteResult(op, str(row[1]), int(row[2]), bool(row[3]), applied=False)


def _written(
    conn: sqlite3.Connection,
    tenant: str,
    namespace: str,
    write_id: str | None,
    result: MemoryWriteResult,
    micros: int,
) -> None:
    """The rest of a write's transaction (the version was bumped first): the write id and
    the lazy purges (the namespace's expired items: masked in a cached matrix already, so
    not counted as deletes; the tenant's old write ids)."""
    conn.execute(
        "DELETE FROM memory_items WHERE tenant = ? AND namespace = ?"
        " AND expires_at IS NOT NULL AND expires_at <= ?",
        (tenant, namespace, micros),
    )
    horizon = to_micros(from_micros(micros) - timedelta(days=WRITE_ID_DAYS))
    conn.execute("DELETE FROM memory_writes WHERE tenant = ? AND at < ?", (tenant, horizon))
    if write_id is not None:
        conn.execute(
            "INSERT INTO memory_writes (tenant, write_id, op, key, version, existed, at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            (tenant, write_id, result.op, result.key, result.version, int(result.existed), micros),
        )
