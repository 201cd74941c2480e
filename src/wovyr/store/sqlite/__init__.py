"""The embedded default store: one SQLite file (WAL, synchronous=FULL); without a path, the
`memory://` store (a file in a temporary folder, removed on close, synchronous=OFF)."""

from wovyr.store.sqlite.store import SQLiteStore

__all__ = ["SQLiteStore"]
