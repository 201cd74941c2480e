"""The embedded default store: one SQLite file (WAL, synchronous=FULL)."""

from wovyr.store.sqlite.store import SQLiteStore

__all__ = ["SQLiteStore"]
