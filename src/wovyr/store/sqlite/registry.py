"""The DefinitionRegistry half of the SQLite store (mixed into SQLiteStore)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any

from wovyr.store.base import DEFAULT_TENANT, DefinitionRecord
from wovyr.store.codec import from_micros, to_micros
from wovyr.store.registry import ApplyOutcome

__all__ = ["SQLiteRegistry"]

_SELECT = (
    "SELECT d.hash, d.name, r.version, d.source, r.applied_at, d.tenant FROM registry r"
    " JOIN definitions d ON d.tenant = r.tenant AND d.hash = r.hash"
)


def _record(row: Sequence[Any]) -> DefinitionRecord:
    return DefinitionRecord(row[0], row[1], row[2], row[3], from_micros(row[4]), row[5])


class SQLiteRegistry:
    _write: Callable[[], AbstractContextManager[sqlite3.Connection]]
    _read: Callable[..., list[Any]]

    def apply_definition(self, record: DefinitionRecord) -> ApplyOutcome:
        with self._write() as conn:
            row = conn.execute(
                "SELECT hash FROM registry WHERE tenant = ? AND name = ? AND version = ?",
                (record.tenant, record.name, record.version),
            ).fetchone()
            if row is not None:
                return "unchanged" if row[0] == record.hash else "conflict"
            conn.execute(
                "INSERT OR IGNORE INTO definitions"
                " (tenant, hash, name, version, source, created_at) VALUES (?, ?, ?, ?, ?, ?)",
                (
                    record.tenant,
                    record.hash,
                    record.name,
                    record.version,
                    record.source,
                    to_micros(record.created_at),
                ),
            )
            conn.execute(
                "INSERT INTO registry (tenant, name, version, hash, applied_at)"
                " VALUES (?, ?, ?, ?, ?)",
                (
                    record.tenant,
                    record.name,
                    record.version,
                    record.hash,
                    to_micros(record.created_at),
                ),
            )
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
        return _record(rows[0]) if rows else None

    def list_registered(self, tenant: str = DEFAULT_TENANT) -> list[DefinitionRecord]:
        rows = self._read(
            f"{_SELECT} WHERE r.tenant = ? ORDER BY r.applied_at DESC, r.rowid DESC", (tenant,)
        )
        return [_record(r) for r in rows]
