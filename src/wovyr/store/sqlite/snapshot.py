"""Consistent copies of a live SQLite store, and checks of such a copy.

`write_snapshot` copies the database through SQLite's online backup API a few pages per
step. The source connection first opens a read transaction: in WAL mode a reader holds a
snapshot of the file and blocks no writer, so the copy is one consistent moment (it never
restarts because a writer changed a page meanwhile) and the writers keep committing while
it runs. The copy is written to a new file, fsynced, and checked with `integrity_check`
before anyone relies on it.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from pathlib import Path

from wovyr.errors import StoreError

__all__ = ["check_file", "open_elsewhere", "write_snapshot"]

PAGES_PER_STEP = 1024  # 4 MiB at the default page size


def write_snapshot(source: sqlite3.Connection, dest: Path, pages: int = PAGES_PER_STEP) -> None:
    """Copy the database of `source` (a connection of its own: it is left in a read
    transaction until the copy is done) into the new file `dest`."""
    if dest.exists():
        raise StoreError(f"the snapshot file {dest} exists already")
    try:
        source.execute("BEGIN")
        source.execute("SELECT count(*) FROM sqlite_master").fetchone()  # pin the snapshot
        target = sqlite3.connect(dest, isolation_level=None)
        try:
            source.backup(target, pages=pages)
            target.execute("PRAGMA journal_mode = DELETE")  # one self-contained file
        finally:
            target.close()
    except sqlite3.Error as exc:
        with contextlib.suppress(OSError):
            dest.unlink()
        raise StoreError(f"the snapshot of the store failed: {exc}") from exc
    finally:
        with contextlib.suppress(sqlite3.Error):
            source.execute("ROLLBACK")
    fd = os.open(dest, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def check_file(path: Path) -> list[str]:
    """What `PRAGMA integrity_check` finds wrong in the database file `path` (opened
    read-only, as immutable: the check writes nothing, not even a -wal or -shm file)."""
    uri = f"file:{path.resolve()}?mode=ro&immutable=1"
    try:
        conn = sqlite3.connect(uri, uri=True)
    except sqlite3.Error as exc:
        return [f"cannot open {path.name} as a SQLite database: {exc}"]
    try:
        rows = conn.execute("PRAGMA integrity_check").fetchall()
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    except sqlite3.Error as exc:
        return [f"{path.name} is not a usable SQLite database: {exc}"]
    finally:
        conn.close()
    problems = [str(r[0]) for r in rows if r[0] != "ok"]
    if not problems and "schema_migrations" not in tables:
        problems.append(f"{path.name} is a SQLite database but not a Wovyr store")
    return problems


def open_elsewhere(path: Path) -> bool:
    """True while another connection has the database `path` open (a server, a worker, a
    CLI command; in any process). In WAL mode every open connection holds a shared lock, so
    a connection asking for the file to itself (`locking_mode = EXCLUSIVE`) without waiting
    is refused exactly then. The probe writes nothing and never creates the file."""
    try:
        conn = sqlite3.connect(f"file:{path.resolve()}?mode=rw", uri=True, timeout=0)
    except sqlite3.Error:
        return False  # no such file: nobody has it open
    try:
        conn.execute("PRAGMA locking_mode = EXCLUSIVE")
        conn.execute("BEGIN EXCLUSIVE")
        conn.execute("ROLLBACK")
        return False
    except sqlite3.OperationalError:
        return True
    finally:
        conn.close()
