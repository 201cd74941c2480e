"""`memory://` is the SQLite store without a path: a file in a private temporary folder, gone
when the store is closed or collected, written without fsync (nothing in it outlives the
process), started from a copy of a migrated empty database, and otherwise the SQLite store
the contract suite runs on: WAL, so that a reader on another thread reads while a write
transaction is open. A new durable file starts from the same copy, linked into place (never
over a file that is there); where it cannot be, it is migrated in place, to the same schema."""

from __future__ import annotations

import gc
import os
import sqlite3
import stat
import subprocess
import sys
import threading
from contextlib import closing
from pathlib import Path

import pytest
from tests.contract.test_store_contract import create

from wovyr.errors import StoreUnavailable
from wovyr.store import capabilities, open_store
from wovyr.store.sqlite import SQLiteStore
from wovyr.store.sqlite.store import _migrations
from wovyr.testing import memory_engine


def _pragma(store: SQLiteStore, name: str) -> object:
    return store._read(f"PRAGMA {name}")[0][0]


def test_memory_url_is_a_private_sqlite_file_gone_at_close() -> None:
    store = open_store("memory://")
    other = open_store("memory://")
    assert isinstance(store, SQLiteStore) and store.url == "memory://"
    folder = store.path.parent
    assert folder.is_dir() and folder != other.path.parent
    assert capabilities(store).migrations is not None
    create(store, "e1")
    assert store.load("e1", "default") is not None
    assert other.load("e1", "default") is None  # two memory stores share nothing
    store.close()
    other.close()
    assert not folder.exists() and not other.path.parent.exists()


def test_a_memory_store_never_closed_is_removed_when_collected() -> None:
    engine = memory_engine()
    folder = engine.store.path.parent  # type: ignore[attr-defined]
    engine.start(
        "apiVersion: wovyr/v1\nkind: Workflow\nmetadata: {name: w}\n"
        "activities: [{id: a, set: {x: 1}}]\n"
    )
    assert folder.is_dir()
    del engine
    gc.collect()
    assert not folder.exists()


def test_memory_skips_fsync_and_starts_from_the_schema_a_migrated_file_has(
    tmp_path: Path,
) -> None:
    memory, durable = SQLiteStore(), SQLiteStore(tmp_path / "w.db")
    try:
        assert _pragma(memory, "synchronous") == 0  # OFF
        assert _pragma(durable, "synchronous") == 2  # FULL
        assert _pragma(memory, "journal_mode") == _pragma(durable, "journal_mode") == "wal"
        schema = "SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY type, name"
        assert memory._read(schema) == durable._read(schema)
        versions = "SELECT version FROM schema_migrations ORDER BY version"
        assert memory._read(versions) == durable._read(versions)
        assert memory.schema_version() == memory.latest_migration() > 0
    finally:
        memory.close()
        durable.close()


def test_a_reader_does_not_wait_for_an_open_write_transaction() -> None:
    store = SQLiteStore(busy_timeout_ms=200)
    try:
        create(store, "e1")
        seen: list[object] = []
        with store._write() as conn:  # a write in flight, as a committing worker holds it
            conn.execute("DELETE FROM executions WHERE id = 'e1'")
            reader = threading.Thread(target=lambda: seen.append(store.load("e1", "default")))
            reader.start()
            reader.join()
        assert seen and seen[0] is not None  # read the committed state, without waiting
        assert store.load("e1", "default") is None
    finally:
        store.close()


def test_opening_a_migrated_file_waits_for_no_writer(tmp_path: Path) -> None:
    """Another process's write transaction (a busy worker) does not hold up an open: a file
    with every migration is only read. One that lacks a migration still takes the write
    lock to apply it (so here, with the lock held elsewhere, its open fails as locked)."""
    path = tmp_path / "w.db"
    SQLiteStore(path).close()
    holder = sqlite3.connect(path, isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")
        store = SQLiteStore(path, busy_timeout_ms=100)
        assert store.schema_version() == store.latest_migration()
        store.close()
        holder.execute("DELETE FROM schema_migrations WHERE version = ?", (_migrations()[-1][0],))
        holder.execute("COMMIT")
        holder.execute("BEGIN IMMEDIATE")
        with pytest.raises(StoreUnavailable, match="locked"):
            SQLiteStore(path, busy_timeout_ms=100)
    finally:
        holder.execute("ROLLBACK")
        holder.close()


SCHEMA = "SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY type, name"
VERSIONS = "SELECT version FROM schema_migrations ORDER BY version"


def test_a_new_file_is_the_image_and_has_the_schema_of_one_migrated_in_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new file starts from the migrated image (owner-only, nothing left beside it); where
    the file system refuses a hard link it is created empty and migrated in place, and both
    hold the same schema and migrations."""
    from_image = SQLiteStore(tmp_path / "image" / "w.db")
    monkeypatch.setattr(os, "link", _refuse_links)
    in_place = SQLiteStore(tmp_path / "in-place" / "w.db")
    try:
        assert from_image._read(SCHEMA) == in_place._read(SCHEMA)
        assert from_image._read(VERSIONS) == in_place._read(VERSIONS)
        assert in_place.schema_version() == in_place.latest_migration() > 0
        for store in (from_image, in_place):
            assert stat.S_IMODE(store.path.stat().st_mode) == 0o600
            assert _pragma(store, "journal_mode") == "wal"
            assert {p.name for p in store.path.parent.iterdir()} <= {"w.db", "w.db-wal", "w.db-shm"}
    finally:
        from_image.close()
        in_place.close()


def _refuse_links(source: object, target: object) -> None:
    raise PermissionError(1, "hard links are not supported here")


def test_a_store_that_is_there_is_opened_not_replaced(tmp_path: Path) -> None:
    path = tmp_path / "w.db"
    with closing(SQLiteStore(path)) as first:
        create(first, "e1")
    with closing(SQLiteStore(path)) as again:
        assert again.load("e1", "default") is not None


_OPEN_AND_WRITE = """
import sys, time
from contextlib import closing
from pathlib import Path
from tests.contract.test_store_contract import create
from wovyr.store.sqlite import SQLiteStore
go = Path(sys.argv[1]).with_name("go")
while not go.exists():
    time.sleep(0.001)
with closing(SQLiteStore(Path(sys.argv[1]))) as store:
    create(store, sys.argv[2])
"""


def test_processes_creating_one_new_store_at_once_all_write_to_the_same_file(
    tmp_path: Path,
) -> None:
    """Six processes open the same new path at the same moment and each writes an
    execution: all six are in the one file (none was replaced by another's new file)."""
    path = tmp_path / "shared" / "w.db"
    path.parent.mkdir()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    children = [
        subprocess.Popen([sys.executable, "-c", _OPEN_AND_WRITE, str(path), f"e{i}"], env=env)
        for i in range(6)
    ]
    (path.parent / "go").touch()
    assert [child.wait(timeout=60) for child in children] == [0] * 6
    with closing(SQLiteStore(path)) as store:
        assert all(store.load(f"e{i}", "default") is not None for i in range(6))
        assert store.schema_version() == store.latest_migration()
    assert not [p.name for p in path.parent.iterdir() if p.name.startswith(".w.db.")]
