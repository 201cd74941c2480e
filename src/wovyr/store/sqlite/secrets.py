"""Scrubbing the data keys' earlier copies from the SQLite store (mixed into SQLiteStore)."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path

from wovyr.errors import StoreError

__all__ = ["SQLiteScrub"]

_KEY = "tenant, version, wrapped, root_id, created_at"


class SQLiteScrub:
    """`scrub_data_keys` of the SQLite store (the rest of the secrets role is shared:
    `wovyr.store.sql.secrets`). Needs `_transaction()`, `_write_lock` and `_writer` from
    SQLiteStore."""

    _transaction: Callable[[], AbstractContextManager[sqlite3.Connection]]
    _write_lock: threading.Lock
    _writer: sqlite3.Connection
    path: Path

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
