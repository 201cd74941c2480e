"""The stream journal of the SQLite store (mixed into SQLiteStore)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any

from wovyr.store.codec import from_micros, to_micros
from wovyr.store.streams import NewChunk, StreamChunk

__all__ = ["SQLiteStreams"]


class SQLiteStreams:
    """Needs `_write()` and `_read()` from SQLiteStore."""

    _write: Callable[[], AbstractContextManager[sqlite3.Connection]]
    _read: Callable[..., list[Any]]

    def append_stream(
        self,
        tenant: str,
        execution_id: str,
        fence: int,
        chunks: Sequence[NewChunk],
        at: datetime,
    ) -> bool:
        with self._write() as conn:  # BEGIN IMMEDIATE: the fence and the numbers hold
            row = conn.execute(
                "SELECT fence FROM executions WHERE tenant = ? AND id = ?", (tenant, execution_id)
            ).fetchone()
            if row is None or int(row[0]) != fence:
                return False
            last = conn.execute(
                "SELECT coalesce(max(n), 0) FROM stream_chunks"
                " WHERE tenant = ? AND execution_id = ?",
                (tenant, execution_id),
            ).fetchone()[0]
            micros = to_micros(at)
            conn.executemany(
                "INSERT INTO stream_chunks"
                " (tenant, execution_id, n, activity, attempt, recovery, turn, kind, text, at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (
                        tenant,
                        execution_id,
                        last + i,
                        c.activity,
                        c.attempt,
                        c.recovery,
                        c.turn,
                        c.kind,
                        c.text,
                        micros,
                    )
                    for i, c in enumerate(chunks, 1)
                ],
            )
            return True

    def read_stream(
        self, tenant: str, execution_id: str, after: int = 0, limit: int = 500
    ) -> list[StreamChunk]:
        rows = self._read(
            "SELECT n, activity, attempt, turn, kind, text, at, recovery FROM stream_chunks"
            " WHERE tenant = ? AND execution_id = ? AND n > ? ORDER BY n LIMIT ?",
            (tenant, execution_id, after, limit),
        )
        return [
            StreamChunk(
                int(r[0]),
                str(r[1]),
                int(r[2]),
                int(r[3]),
                r[4],
                str(r[5]),
                from_micros(r[6]),
                int(r[7]),
            )
            for r in rows
        ]
