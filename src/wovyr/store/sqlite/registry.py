"""Definitions by hash and the DefinitionRegistry half of the SQLite store (mixed into
SQLiteStore)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from wovyr.store.audit import AuditEntry
from wovyr.store.base import DEFAULT_TENANT, DefinitionRecord
from wovyr.store.registry import ApplyOutcome
from wovyr.store.rows import SQLITE, definition_params, definition_record
from wovyr.store.sqlite.audit import append_audit_row

__all__ = ["SQLiteRegistry"]

_PUT_DEFINITION = (
    "INSERT OR IGNORE INTO definitions (tenant, hash, name, version, source, created_at)"
    " VALUES (:tenant, :hash, :name, :version, :source, :created_at)"
)
_SELECT = (
    "SELECT d.hash, d.name, r.version, d.source, r.applied_at AS created_at, d.tenant"
    " FROM registry r JOIN definitions d ON d.tenant = r.tenant AND d.hash = r.hash"
)


class SQLiteRegistry:
    """Needs `_write()` and `_read()` from SQLiteStore."""

    _write: Callable[[], AbstractContextManager[sqlite3.Connection]]
    _read: Callable[..., list[Any]]

    def put_definition(self, record: DefinitionRecord) -> None:
        with self._write() as conn:
            conn.execute(_PUT_DEFINITION, definition_params(record, SQLITE))

    def apply_definition(
        self, record: DefinitionRecord, *, audit: AuditEntry | None = None
    ) -> ApplyOutcome:
        params = definition_params(record, SQLITE)
        with self._write() as conn:
            row = conn.execute(
                "SELECT hash FROM registry WHERE tenant = ? AND name = ? AND version = ?",
                (record.tenant, record.name, record.version),
            ).fetchone()
            if row is not None:
                return "unchanged" if row["hash"] == record.hash else "conflict"
            conn.execute(_PUT_DEFINITION, params)
            conn.execute(
                "INSERT INTO registry (tenant, name, version, hash, applied_at)"
                " VALUES (:tenant, :name, :version, :hash, :created_at)",
                params,
            )
            append_audit_row(conn, audit)
            return "applied"

    def registered_definition(
        self, name: str, version: str | None = None, tenant: str = DEFAULT_TENANT
    ) -> DefinitionRecord | None:
        if version is None:
            rows = self._read(
                f"{_SELECT} WHERE r.tenant = ? AND r.name = ?"
                " ORDER BY r.applied_at DESC, r.rowid DESC LIMIT 1",
                (tenant, name),
            )
        else:
            rows = self._read(
                f"{_SELECT} WHERE r.tenant = ? AND r.name = ? AND r.version = ?",
                (tenant, name, version),
            )
        return definition_record(rows[0], SQLITE) if rows else None

    def list_registered(self, tenant: str = DEFAULT_TENANT) -> list[DefinitionRecord]:
        rows = self._read(
            f"{_SELECT} WHERE r.tenant = ? ORDER BY r.applied_at DESC, r.rowid DESC", (tenant,)
        )
        return [definition_record(r, SQLITE) for r in rows]
