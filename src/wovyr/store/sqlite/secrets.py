"""The KMS and secrets tables of the SQLite store (mixed into SQLiteStore)."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import datetime
from pathlib import Path
from typing import Any

from wovyr.errors import StoreError
from wovyr.store.audit import AuditEntry
from wovyr.store.codec import to_micros
from wovyr.store.rows import (
    SQLITE,
    data_key_params,
    data_key_record,
    kms_root_params,
    kms_root_record,
    secret_record,
)
from wovyr.store.secrets import SHREDDED, DataKeyRecord, KmsRootRecord, SecretRecord
from wovyr.store.sqlite.audit import append_audit_row

__all__ = ["SQLiteSecrets"]

_KEY = "tenant, version, wrapped, root_id, created_at"
_SECRET = "tenant, name, version, ciphertext, key_version, created_at, updated_at, updated_by"
_ROOT = "root_id, created_at, escrowed_at, escrowed_by, rotated_at"


class SQLiteSecrets:
    """Needs `_write()`, `_read()`, `_transaction()`, `_write_lock` and `_writer` from
    SQLiteStore."""

    _write: Callable[[], AbstractContextManager[sqlite3.Connection]]
    _read: Callable[..., list[Any]]
    _transaction: Callable[[], AbstractContextManager[sqlite3.Connection]]
    _write_lock: threading.Lock
    _writer: sqlite3.Connection
    path: Path

    def add_data_key(self, record: DataKeyRecord) -> DataKeyRecord:
        with self._write() as conn:
            conn.execute(
                f"INSERT OR IGNORE INTO data_keys ({_KEY})"
                " VALUES (:tenant, :version, :wrapped, :root_id, :created_at)",
                data_key_params(record, SQLITE),
            )
            row = conn.execute(
                f"SELECT {_KEY} FROM data_keys WHERE tenant = ? AND version = ?",
                (record.tenant, record.version),
            ).fetchone()
        return data_key_record(row, SQLITE)

    def data_key(self, tenant: str, version: int | None = None) -> DataKeyRecord | None:
        if version is None:
            rows = self._read(
                f"SELECT {_KEY} FROM data_keys WHERE tenant = ? ORDER BY version DESC LIMIT 1",
                (tenant,),
            )
        else:
            rows = self._read(
                f"SELECT {_KEY} FROM data_keys WHERE tenant = ? AND version = ?",
                (tenant, version),
            )
        return data_key_record(rows[0], SQLITE) if rows else None

    def list_data_keys(self) -> list[DataKeyRecord]:
        rows = self._read(f"SELECT {_KEY} FROM data_keys ORDER BY tenant, version")
        return [data_key_record(r, SQLITE) for r in rows]

    def rewrap_data_key(
        self, tenant: str, version: int, old_root_id: str, wrapped: bytes, root_id: str
    ) -> bool:
        with self._write() as conn:
            cur = conn.execute(
                "UPDATE data_keys SET wrapped = ?, root_id = ?"
                " WHERE tenant = ? AND version = ? AND root_id = ?",
                (wrapped, root_id, tenant, version, old_root_id),
            )
            return cur.rowcount == 1

    def shred_data_keys(self, tenant: str, *, audit: AuditEntry | None = None) -> int:
        with self._write() as conn:
            cur = conn.execute(
                "UPDATE data_keys SET wrapped = x'', root_id = ? WHERE tenant = ? AND root_id != ?",
                (SHREDDED, tenant, SHREDDED),
            )
            append_audit_row(conn, audit)
            return cur.rowcount

    def scrub_data_keys(self) -> list[str]:
        # Deleting every row frees the table's pages and re-inserting writes them anew:
        # with secure_delete on (a compile-time default on some builds only) every freed
        # byte is zeroed, so no page keeps an earlier version of a row. The checkpoint then
        # copies the pages into the database file and truncates the WAL, which held every
        # page as each transaction wrote it.
        with self._write_lock:
            conn = self._writer
            try:
                before = int(conn.execute("PRAGMA secure_delete").fetchone()[0])
                conn.execute("PRAGMA secure_delete = ON")
                try:
                    with self._transaction() as tx:
                        rows = tx.execute(f"SELECT {_KEY} FROM data_keys").fetchall()
                        tx.execute("DELETE FROM data_keys")
                        tx.executemany(
                            f"INSERT INTO data_keys ({_KEY}) VALUES (?, ?, ?, ?, ?)",
                            [tuple(r) for r in rows],
                        )
                finally:
                    conn.execute(f"PRAGMA secure_delete = {before}")
                busy, wal, copied = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            except sqlite3.Error as exc:
                raise StoreError(f"scrubbing the data keys of {self.path}: {exc}") from exc
        if busy:
            return [
                f"the WAL of {self.path} could not be emptied ({copied} of {wal} pages "
                "copied): another connection was reading; it keeps the earlier pages until "
                "the next full checkpoint (run the shred again to retry)"
            ]
        return []

    def put_secret(
        self,
        tenant: str,
        name: str,
        ciphertext: bytes,
        key_version: int,
        at: datetime,
        by: str,
        *,
        audit: AuditEntry | None = None,
    ) -> SecretRecord:
        micros = to_micros(at)
        with self._write() as conn:
            conn.execute(
                f"INSERT INTO secrets ({_SECRET}) VALUES (?, ?, 1, ?, ?, ?, ?, ?)"
                " ON CONFLICT (tenant, name) DO UPDATE SET version = version + 1,"
                " ciphertext = excluded.ciphertext, key_version = excluded.key_version,"
                " updated_at = excluded.updated_at, updated_by = excluded.updated_by",
                (tenant, name, ciphertext, key_version, micros, micros, by),
            )
            row = conn.execute(
                f"SELECT {_SECRET} FROM secrets WHERE tenant = ? AND name = ?", (tenant, name)
            ).fetchone()
            append_audit_row(conn, audit)
        return secret_record(row, SQLITE)

    def get_secret(self, tenant: str, name: str) -> SecretRecord | None:
        rows = self._read(
            f"SELECT {_SECRET} FROM secrets WHERE tenant = ? AND name = ?", (tenant, name)
        )
        return secret_record(rows[0], SQLITE) if rows else None

    def list_secrets(self, tenant: str) -> list[SecretRecord]:
        rows = self._read(
            f"SELECT {_SECRET} FROM secrets WHERE tenant = ? ORDER BY name", (tenant,)
        )
        return [secret_record(r, SQLITE) for r in rows]

    def delete_secret(self, tenant: str, name: str, *, audit: AuditEntry | None = None) -> bool:
        with self._write() as conn:
            cur = conn.execute("DELETE FROM secrets WHERE tenant = ? AND name = ?", (tenant, name))
            if cur.rowcount != 1:
                return False
            append_audit_row(conn, audit)
            return True

    def kms_root(self, root_id: str) -> KmsRootRecord | None:
        rows = self._read(f"SELECT {_ROOT} FROM kms_roots WHERE root_id = ?", (root_id,))
        return kms_root_record(rows[0], SQLITE) if rows else None

    def put_kms_root(self, record: KmsRootRecord, *, audit: AuditEntry | None = None) -> None:
        with self._write() as conn:
            conn.execute(
                f"INSERT OR REPLACE INTO kms_roots ({_ROOT})"
                " VALUES (:root_id, :created_at, :escrowed_at, :escrowed_by, :rotated_at)",
                kms_root_params(record, SQLITE),
            )
            append_audit_row(conn, audit)
