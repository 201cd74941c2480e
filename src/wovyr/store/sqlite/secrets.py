"""The KMS and secrets tables of the SQLite store (mixed into SQLiteStore)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any

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
    """Needs `_write()` and `_read()` from SQLiteStore."""

    _write: Callable[[], AbstractContextManager[sqlite3.Connection]]
    _read: Callable[..., list[Any]]

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
