"""Checking and restoring a store snapshot (`Snapshotting.snapshot` writes one), by kind.

Like `open_store`, this module reaches the drivers lazily by kind (`sqlite`, `postgres`), so
`wovyr.platform.backup` never imports one. A restore is *staged*: the snapshot is put where
the target store will live without disturbing the target (SQLite: a temporary file beside
the database; PostgreSQL: the target schema renamed aside first), the caller opens the
staged store at `Staged.url` to migrate and check it, then `commit`s (it replaces the
target) or `abort`s (the target is as it was).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

from wovyr.errors import ConfigError, Conflict
from wovyr.store.base import Store

__all__ = [
    "Staged",
    "check_snapshot",
    "latest_migration",
    "scratch_store",
    "stage_restore",
    "target_held",
    "target_in_use",
]

_SIDE_FILES = ("-wal", "-shm", "-journal")


class Staged(Protocol):
    """A restored store the target does not use yet."""

    @property
    def url(self) -> str: ...

    def commit(self) -> None: ...

    def abort(self) -> None: ...


def check_snapshot(kind: str, path: Path) -> list[str]:
    """What is wrong with the snapshot file `path` of a `kind` store ([]: nothing):
    SQLite `PRAGMA integrity_check`, PostgreSQL `pg_restore --list`."""
    if kind == "sqlite":
        from wovyr.store.sqlite.snapshot import check_file

        return check_file(path)
    if kind == "postgres":
        from wovyr.store.postgres.snapshot import check_dump

        return check_dump(path)
    raise ConfigError(f"unknown store kind {kind!r} in the backup")


@contextlib.contextmanager
def scratch_store(dump: Path, url: str, dump_schema: str | None) -> Iterator[Store]:
    """A PostgreSQL `dump` restored into a scratch database on the server of `url` for the
    time of the block (dropped after; nothing else on the server touched), opened as it
    was dumped (not migrated)."""
    from wovyr.store.postgres import PostgresStore
    from wovyr.store.postgres.snapshot import scratch_restore

    with scratch_restore(dump, url, dump_schema or "public") as scratch:
        store = PostgresStore(scratch, auto_migrate=False)
        try:
            yield store
        finally:
            store.close()


def latest_migration(kind: str) -> int:
    """The highest schema migration this code ships for a `kind` store."""
    if kind == "sqlite":
        from wovyr.store.sqlite.store import _migrations

        return max((version for version, _ in _migrations()), default=0)
    if kind == "postgres":
        from wovyr.store.postgres.queries import migrations

        return max((version for version, _ in migrations()), default=0)
    raise ConfigError(f"unknown store kind {kind!r} in the backup")


def _sqlite_path(url: str) -> Path:
    return Path(url[len("sqlite:///") :]).expanduser()


def target_in_use(url: str) -> bool:
    """True when the store at `url` holds anything (a non-empty file, a schema with tables)."""
    if url.startswith("sqlite:///"):
        path = _sqlite_path(url)
        return path.exists() and path.stat().st_size > 0
    if url.startswith(("postgresql://", "postgres://")):
        from wovyr.store.postgres.snapshot import target_tables

        return target_tables(url) > 0
    raise ConfigError(f"a restore target is a sqlite:/// or postgresql:// URL, not {url!r}")


#: How recently a worker must have reported (PostgreSQL's `worker_members`) to count as
#: holding the store: twice the default lease, as workers report every third of theirs.
HELD_SECONDS = 60.0


def target_held(url: str) -> str | None:
    """Who holds the store at `url` right now (None: nobody), so that a restore never
    replaces a store under a running server or worker. SQLite: any connection to the file
    (of any process, this one included); PostgreSQL: a worker that reported in the last
    `HELD_SECONDS` (every server runs one)."""
    if url.startswith("sqlite:///"):
        from wovyr.store.sqlite.snapshot import open_elsewhere

        path = _sqlite_path(url)
        return f"{path} is open in another connection" if open_elsewhere(path) else None
    if url.startswith(("postgresql://", "postgres://")):
        from wovyr.store.postgres.snapshot import live_workers

        owners = live_workers(url, HELD_SECONDS)
        if not owners:
            return None
        return f"{len(owners)} worker(s) reported in the last {HELD_SECONDS:g} s: " + ", ".join(
            owners[:5]
        )
    raise ConfigError(f"a restore target is a sqlite:/// or postgresql:// URL, not {url!r}")


class _StagedFile:
    """A SQLite snapshot copied beside the target database as a hidden temporary file."""

    def __init__(self, snapshot: Path, db: Path) -> None:
        db.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.db = db
        self.tmp = db.parent / f".{db.name}.restoring-{secrets.token_hex(4)}"
        shutil.copyfile(snapshot, self.tmp)
        os.chmod(self.tmp, 0o600)
        _fsync(self.tmp)

    @property
    def url(self) -> str:
        return f"sqlite:///{self.tmp}"

    def commit(self) -> None:
        """Move the old database (with its -wal: it belongs to it) aside as
        `<name>.pre-restore`, then the restored file into its place."""
        if self.db.exists():
            aside = self.db.with_name(self.db.name + ".pre-restore")
            for suffix in ("", *_SIDE_FILES):
                old = Path(f"{self.db}{suffix}")
                if old.exists():
                    os.replace(old, Path(f"{aside}{suffix}"))
        for suffix in _SIDE_FILES:  # a -wal left by the staged store goes with it
            side = Path(f"{self.tmp}{suffix}")
            if side.exists():
                os.replace(side, Path(f"{self.db}{suffix}"))
        os.replace(self.tmp, self.db)
        _fsync(self.db.parent)

    def abort(self) -> None:
        for suffix in ("", *_SIDE_FILES):
            with contextlib.suppress(OSError):
                Path(f"{self.tmp}{suffix}").unlink()


def _fsync(path: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def stage_restore(
    kind: str, snapshot: Path, url: str, *, dump_schema: str | None, force: bool
) -> Staged:
    """Put `snapshot` (of a `kind` store) where the store at `url` will find it once
    committed. A target that holds data is refused (`Conflict`) unless `force`."""
    if kind == "sqlite" and url.startswith("sqlite:///"):
        if target_in_use(url) and not force:
            raise Conflict(
                f"the target store {_sqlite_path(url)} is not empty",
                hint="restore into an empty home, or give --force to replace it (stop every "
                "server and worker using it first)",
            )
        return _StagedFile(snapshot, _sqlite_path(url))
    if kind == "postgres" and url.startswith(("postgresql://", "postgres://")):
        from wovyr.store.postgres.snapshot import stage_restore as pg_stage

        return pg_stage(snapshot, url, dump_schema or "public", force=force)
    scheme = url.partition(":")[0]
    raise ConfigError(
        f"a backup of a {kind} store restores into a {kind} store, not {scheme}",
        hint="give --target HOME for SQLite, --target postgresql://... for PostgreSQL",
    )
