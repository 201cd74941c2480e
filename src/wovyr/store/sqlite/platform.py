"""The platform half of the SQLite store (API keys, idempotency keys; mixed into SQLiteStore)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any

from wovyr.store.codec import from_micros, to_micros
from wovyr.store.platform import ApiKeyRecord, IdempotencyRecord

__all__ = ["SQLitePlatform"]

_KEY_COLUMNS = "id, tenant, role, name, prefix, key_hash, created_at, revoked_at, last_used_at"


def _key(row: Sequence[Any]) -> ApiKeyRecord:
    return ApiKeyRecord(
        id=row[0],
        tenant=row[1],
        role=row[2],
        name=row[3],
        prefix=row[4],
        key_hash=row[5],
        created_at=from_micros(row[6]),
        revoked_at=None if row[7] is None else from_micros(row[7]),
        last_used_at=None if row[8] is None else from_micros(row[8]),
    )


class SQLitePlatform:
    """Needs `_write()` and `_read()` from SQLiteStore."""

    _write: Callable[[], AbstractContextManager[sqlite3.Connection]]
    _read: Callable[..., list[Any]]

    # --- API keys ------------------------------------------------------------------------

    def create_api_key(self, record: ApiKeyRecord, *, only_if_none: bool = False) -> bool:
        values = (
            record.id,
            record.tenant,
            record.role,
            record.name,
            record.prefix,
            record.key_hash,
            to_micros(record.created_at),
            None if record.revoked_at is None else to_micros(record.revoked_at),
            None if record.last_used_at is None else to_micros(record.last_used_at),
        )
        with self._write() as conn:  # BEGIN IMMEDIATE: the emptiness check cannot race
            if only_if_none and conn.execute("SELECT 1 FROM api_keys LIMIT 1").fetchone():
                return False
            cur = conn.execute(
                f"INSERT OR IGNORE INTO api_keys ({_KEY_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?)",
                values,
            )
            return cur.rowcount == 1

    def api_key_by_hash(self, key_hash: str) -> ApiKeyRecord | None:
        rows = self._read(f"SELECT {_KEY_COLUMNS} FROM api_keys WHERE key_hash = ?", (key_hash,))
        return _key(rows[0]) if rows else None

    def get_api_key(self, key_id: str) -> ApiKeyRecord | None:
        rows = self._read(f"SELECT {_KEY_COLUMNS} FROM api_keys WHERE id = ?", (key_id,))
        return _key(rows[0]) if rows else None

    def list_api_keys(self, tenant: str | None = None) -> list[ApiKeyRecord]:
        if tenant is None:
            rows = self._read(f"SELECT {_KEY_COLUMNS} FROM api_keys ORDER BY created_at, id")
        else:
            rows = self._read(
                f"SELECT {_KEY_COLUMNS} FROM api_keys WHERE tenant = ? ORDER BY created_at, id",
                (tenant,),
            )
        return [_key(r) for r in rows]

    def revoke_api_key(self, key_id: str, at: datetime) -> bool:
        with self._write() as conn:
            cur = conn.execute(
                "UPDATE api_keys SET revoked_at = coalesce(revoked_at, ?) WHERE id = ?",
                (to_micros(at), key_id),
            )
            return cur.rowcount == 1

    def touch_api_key(self, key_id: str, at: datetime) -> None:
        with self._write() as conn:
            conn.execute(
                "UPDATE api_keys SET last_used_at = ? WHERE id = ?", (to_micros(at), key_id)
            )

    # --- idempotency keys ----------------------------------------------------------------

    def claim_idempotency_key(self, record: IdempotencyRecord) -> IdempotencyRecord:
        with self._write() as conn:
            conn.execute(
                "INSERT OR IGNORE INTO idempotency_keys"
                " (tenant, key, fingerprint, execution_id, created_at) VALUES (?, ?, ?, ?, ?)",
                (
                    record.tenant,
                    record.key,
                    record.fingerprint,
                    record.execution_id,
                    to_micros(record.created_at),
                ),
            )
            row = conn.execute(
                "SELECT tenant, key, fingerprint, execution_id, created_at FROM idempotency_keys"
                " WHERE tenant = ? AND key = ?",
                (record.tenant, record.key),
            ).fetchone()
        return IdempotencyRecord(row[0], row[1], row[2], row[3], from_micros(row[4]))

    def purge_idempotency_keys(self, before: datetime) -> int:
        with self._write() as conn:
            return conn.execute(
                "DELETE FROM idempotency_keys WHERE created_at < ?", (to_micros(before),)
            ).rowcount
