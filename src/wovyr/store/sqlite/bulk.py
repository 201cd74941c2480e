"""Bulk-action batches in the SQLite store (mixed into SQLiteStore); a delete purges through
the retention role's `purge_executions`."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import datetime, timedelta
from typing import Any

from wovyr.store.bulk import BatchItem, BatchRecord, BatchUpdate, ItemOutcome, NewBatch
from wovyr.store.codec import dumps, from_micros, loads, to_micros
from wovyr.store.sqlite.audit import append_audit_row

__all__ = ["SQLiteBulk"]

_COLUMNS = (
    "tenant, id, action, filter, signal, payload, created_at, created_by, fingerprint,"
    " idempotency_key, status, updated_at, finished_at, cursor, listed_all, listed, ok,"
    " skipped, errors, pages, lease_owner, lease_until, fence"
)
_COUNTED = {"ok": "ok", "skipped": "skipped", "error": "errors"}


def _micros(value: int | None) -> datetime | None:
    return None if value is None else from_micros(value)


def _batch(r: Any) -> BatchRecord:
    return BatchRecord(
        tenant=r[0],
        id=r[1],
        action=r[2],
        filter=loads(r[3]),
        signal=r[4],
        payload=None if r[5] is None else loads(r[5]),
        created_at=from_micros(r[6]),
        created_by=r[7],
        fingerprint=r[8],
        idempotency_key=r[9],
        status=r[10],
        updated_at=from_micros(r[11]),
        finished_at=_micros(r[12]),
        cursor=r[13],
        listed_all=bool(r[14]),
        listed=int(r[15]),
        ok=int(r[16]),
        skipped=int(r[17]),
        errors=int(r[18]),
        pages=int(r[19]),
        lease_owner=r[20],
        lease_until=_micros(r[21]),
        fence=int(r[22]),
    )


def _find(conn: sqlite3.Connection, tenant: str, batch_id: str) -> BatchRecord | None:
    row = conn.execute(
        f"SELECT {_COLUMNS} FROM batches WHERE tenant = ? AND id = ?", (tenant, batch_id)
    ).fetchone()
    return None if row is None else _batch(row)


class SQLiteBulk:
    """Needs `_write()` and `_read()` from SQLiteStore."""

    _write: Callable[[], AbstractContextManager[sqlite3.Connection]]
    _read: Callable[..., list[Any]]

    def create_batch(self, new: NewBatch) -> tuple[bool, BatchRecord]:
        with self._write() as conn:
            row = None
            if new.idempotency_key is not None:
                row = conn.execute(
                    f"SELECT {_COLUMNS} FROM batches WHERE tenant = ? AND idempotency_key = ?",
                    (new.tenant, new.idempotency_key),
                ).fetchone()
            if row is None:
                row = conn.execute(
                    f"SELECT {_COLUMNS} FROM batches"
                    " WHERE tenant = ? AND fingerprint = ? AND status = 'running'",
                    (new.tenant, new.fingerprint),
                ).fetchone()
            if row is not None:
                return False, _batch(row)
            at = to_micros(new.created_at)
            conn.execute(
                "INSERT INTO batches (tenant, id, action, filter, signal, payload, created_at,"
                " created_by, fingerprint, idempotency_key, status, updated_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'running', ?)",
                (
                    new.tenant,
                    new.id,
                    new.action,
                    dumps(dict(new.filter)),
                    new.signal,
                    dumps(new.payload),
                    at,
                    new.created_by,
                    new.fingerprint,
                    new.idempotency_key,
                    at,
                ),
            )
            append_audit_row(conn, new.audit)
            created = _find(conn, new.tenant, new.id)
        assert created is not None
        return True, created

    def get_batch(self, tenant: str, batch_id: str) -> BatchRecord | None:
        rows = self._read(
            f"SELECT {_COLUMNS} FROM batches WHERE tenant = ? AND id = ?", (tenant, batch_id)
        )
        return _batch(rows[0]) if rows else None

    def list_batches(
        self, tenant: str, limit: int = 50, before: tuple[datetime, str] | None = None
    ) -> list[BatchRecord]:
        at, ident = (to_micros(before[0]), before[1]) if before else (None, "")
        rows = self._read(
            f"SELECT {_COLUMNS} FROM batches WHERE tenant = ?"
            " AND (? IS NULL OR (created_at, id) < (?, ?))"
            " ORDER BY created_at DESC, id DESC LIMIT ?",
            (tenant, at, at, ident, limit),
        )
        return [_batch(r) for r in rows]

    def batch_items(
        self,
        tenant: str,
        batch_id: str,
        after: int = 0,
        limit: int = 100,
        outcome: ItemOutcome | None = None,
    ) -> list[BatchItem]:
        sql = (
            "SELECT n, execution_id, outcome, detail, at FROM batch_items"
            " WHERE tenant = ? AND batch_id = ? AND n > ?"
        )
        params: list[Any] = [tenant, batch_id, after]
        if outcome is not None:
            sql += " AND outcome = ?"
            params.append(outcome)
        rows = self._read(sql + " ORDER BY n LIMIT ?", [*params, limit])
        return [BatchItem(int(r[0]), r[1], r[2], r[3], _micros(r[4])) for r in rows]

    def claim_batch(self, owner: str, now: datetime, lease_seconds: float) -> BatchRecord | None:
        with self._write() as conn:
            row = conn.execute(
                "UPDATE batches SET lease_owner = ?, lease_until = ?, fence = fence + 1"
                " WHERE rowid = (SELECT rowid FROM batches WHERE status = 'running'"
                " AND (lease_until IS NULL OR lease_until < ? OR lease_owner = ?)"
                " ORDER BY updated_at, tenant, id LIMIT 1)"
                f" RETURNING {_COLUMNS}",
                (
                    owner,
                    to_micros(now + timedelta(seconds=lease_seconds)),
                    to_micros(now),
                    owner,
                ),
            ).fetchone()
        return None if row is None else _batch(row)

    def update_batch(self, update: BatchUpdate) -> BatchRecord | None:
        with self._write() as conn:
            batch = _find(conn, update.tenant, update.batch_id)
            if batch is None or batch.fence != update.fence or batch.status != "running":
                return None
            key = (update.tenant, update.batch_id)
            added = 0
            for execution_id in update.listed:
                cur = conn.execute(
                    "INSERT OR IGNORE INTO batch_items (tenant, batch_id, n, execution_id,"
                    " outcome) VALUES (?, ?, ?, ?, 'pending')",
                    (*key, batch.listed + added + 1, execution_id),
                )
                added += cur.rowcount
            counts = {"ok": batch.ok, "skipped": batch.skipped, "errors": batch.errors}
            at = to_micros(update.now)
            for o in update.outcomes:
                if o.outcome == "pending":
                    continue
                cur = conn.execute(
                    "UPDATE batch_items SET outcome = ?, detail = ?, at = ?"
                    " WHERE tenant = ? AND batch_id = ? AND execution_id = ?"
                    " AND outcome = 'pending'",
                    (o.outcome, o.detail, at, *key, o.execution_id),
                )
                counts[_COUNTED[o.outcome]] += cur.rowcount
            listed = batch.listed + added
            listed_all = batch.listed_all or update.listed_all
            moved = bool(update.listed) or update.listed_all
            done = listed_all and listed == sum(counts.values())
            conn.execute(
                "UPDATE batches SET listed = ?, ok = ?, skipped = ?, errors = ?, cursor = ?,"
                " listed_all = ?, pages = pages + ?, updated_at = ?, status = ?,"
                " finished_at = ?, lease_owner = ?, lease_until = ?"
                " WHERE tenant = ? AND id = ?",
                (
                    listed,
                    counts["ok"],
                    counts["skipped"],
                    counts["errors"],
                    update.cursor if moved else batch.cursor,
                    int(listed_all),
                    int(moved),
                    at,
                    "completed" if done else "running",
                    at if done else None,
                    None if done else batch.lease_owner,
                    None if done else to_micros(update.lease_until),
                    *key,
                ),
            )
            return _find(conn, *key)
