"""Checking and restoring a store snapshot (`Snapshotting.snapshot` writes one), by kind.

Like `open_store`, this module reaches the drivers through the backend table
(`wovyr.store.backends`), so `wovyr.platform.backup` never imports one. A restore is
*staged*: the snapshot is put where the target store will live without disturbing the
target (SQLite: a temporary file beside the database; PostgreSQL: the target schema renamed
aside first), the caller opens the staged store at `Staged.url` to migrate and check it,
then `commit`s (it replaces the target) or `abort`s (the target is as it was).
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from pathlib import Path

from wovyr.errors import ConfigError
from wovyr.store.backends import Backend, Staged, backend_of_kind, restorable_url
from wovyr.store.base import Store

__all__ = [
    "HELD_SECONDS",
    "Staged",
    "check_snapshot",
    "latest_migration",
    "snapshot_store",
    "stage_restore",
    "target_held",
    "target_in_use",
]

#: How recently a worker must have reported (PostgreSQL's `worker_members`) to count as
#: holding the store: twice the default lease, as workers report every third of theirs.
HELD_SECONDS = 60.0


def check_snapshot(kind: str, path: Path) -> list[str]:
    """What is wrong with the snapshot file `path` of a `kind` store ([]: nothing):
    SQLite `PRAGMA integrity_check`, PostgreSQL `pg_restore --list`."""
    return backend_of_kind(kind).driver().check_snapshot(path)


def latest_migration(kind: str) -> int:
    """The highest schema migration this code ships for a `kind` store."""
    return backend_of_kind(kind).driver().latest_migration()


def snapshot_store(
    kind: str, path: Path, server: str | None, dump_schema: str | None
) -> AbstractContextManager[Store] | None:
    """A block in which the snapshot `path` of a `kind` store is open as a store: a SQLite
    copy where it is; a PostgreSQL dump restored into a scratch database on the server of
    `server` (a PostgreSQL URL) and dropped after, opened as it was dumped. None when it
    needs such a server and `server` is not one."""
    backend = backend_of_kind(kind)
    target = restorable_url(server) if server is not None else None
    on_server = server if target is not None and target.kind == kind else None
    return backend.driver().snapshot_store(path, on_server, dump_schema)


def _target(url: str) -> Backend:
    backend = restorable_url(url)
    if backend is None:
        raise ConfigError(f"a restore target is a sqlite:/// or postgresql:// URL, not {url!r}")
    return backend


def target_in_use(url: str) -> bool:
    """True when the store at `url` holds anything (a non-empty file, a schema with tables)."""
    return _target(url).driver().in_use(url)


def target_held(url: str) -> str | None:
    """Who holds the store at `url` right now (None: nobody), so that a restore never
    replaces a store under a running server or worker. SQLite: any connection to the file
    (of any process, this one included); PostgreSQL: a worker that reported in the last
    `HELD_SECONDS` (every server runs one)."""
    return _target(url).driver().held(url, HELD_SECONDS)


def stage_restore(
    kind: str, snapshot: Path, url: str, *, dump_schema: str | None, force: bool
) -> Staged:
    """Put `snapshot` (of a `kind` store) where the store at `url` will find it once
    committed. A target that holds data is refused (`Conflict`) unless `force`."""
    target = restorable_url(url)
    if target is None or target.kind != kind:
        scheme = url.partition(":")[0]
        raise ConfigError(
            f"a backup of a {kind} store restores into a {kind} store, not {scheme}",
            hint="give --target HOME for SQLite, --target postgresql://... for PostgreSQL",
        )
    return target.driver().stage_restore(snapshot, url, dump_schema, force)
