"""The store backends, one row per URL scheme: the only table that knows the drivers.

A row names its kind (`sqlite`, `postgres`; the kind a backup records), the URLs it opens,
the file a backup keeps its snapshot in (None: a store that is not backed up or restored,
`memory://`) and where its `Driver` lives. The driver is imported only when a row is used,
so opening a SQLite store never imports psycopg. `open_store`, `wovyr.store.snapshots`
(checks and staged restores of snapshots), the backup and the CLI ask this table instead
of looking at a URL's scheme themselves.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import fields
from importlib import import_module
from pathlib import Path
from typing import Any, Protocol

from wovyr.errors import ConfigError
from wovyr.store.base import Store
from wovyr.store.frozen import record

__all__ = [
    "BACKENDS",
    "Backend",
    "Driver",
    "Staged",
    "backend_for",
    "backend_of_kind",
    "restorable_url",
]


class Staged(Protocol):
    """A restored store the target does not use yet: open it at `url` to migrate and check
    it, then `commit` (it replaces the target) or `abort` (the target is as it was)."""

    @property
    def url(self) -> str: ...

    def commit(self) -> None: ...

    def abort(self) -> None: ...


@record
class Driver:
    """What one backend does, as functions: those of the same names in its driver
    package's `backend` module (`Driver.of`).

    - `open_url(url, migrate, db_clock)`: the store at `url` (see `open_store`).
    - `latest_migration()`: the highest schema migration this code ships.
    - `check_snapshot(path)`: what is wrong with a snapshot file ([]: nothing).
    - `snapshot_store(path, server, dump_schema)`: a block in which the snapshot `path` is
      open as a store (None: it cannot be opened without a server, and `server` is none).
    - `in_use(url)`: whether the store at `url` holds anything.
    - `held(url, within_seconds)`: who holds the store at `url` right now (None: nobody).
    - `stage_restore(snapshot, url, dump_schema, force)`: the snapshot put where the
      store at `url` finds it once committed (a target that holds data: `Conflict` unless
      `force`).
    """

    open_url: Callable[[str, bool, bool], Store]
    latest_migration: Callable[[], int]
    check_snapshot: Callable[[Path], list[str]]
    snapshot_store: Callable[[Path, str | None, str | None], AbstractContextManager[Store] | None]
    in_use: Callable[[str], bool]
    held: Callable[[str, float], str | None]
    stage_restore: Callable[[Path, str, str | None, bool], Staged]

    @classmethod
    def of(cls, module: str, **instead: Any) -> Driver:
        """The functions of the module named `module` (`instead`: others, by name)."""
        found = vars(sys.modules[module])
        return cls(**{f.name: instead.get(f.name, found[f.name]) for f in fields(cls)})


@record
class Backend:
    """One row of the table: a kind of store and the URLs that name it."""

    kind: str
    driver_path: str  # "module:attribute" of its `Driver`
    prefixes: tuple[str, ...] = ()  # the URLs that start so
    names: tuple[str, ...] = ()  # the URLs that are exactly so
    snapshot_file: str | None = None
    extra: str | None = None  # the pip extra its driver needs

    def matches(self, url: str) -> bool:
        return url in self.names or url.startswith(self.prefixes)

    @property
    def durable(self) -> bool:
        """Whether its stores outlive the process (and so are backed up and restored)."""
        return self.snapshot_file is not None

    def driver(self) -> Driver:
        module, _, name = self.driver_path.partition(":")
        try:
            driver: Driver = getattr(import_module(module), name)
        except ImportError as exc:
            raise ConfigError(
                f"the {self.kind} store needs the {self.extra} extra: "
                f"pip install 'wovyr[{self.extra}]'"
            ) from exc
        return driver


BACKENDS: tuple[Backend, ...] = (
    Backend(
        "sqlite",
        "wovyr.store.sqlite.backend:DRIVER",
        prefixes=("sqlite:///",),
        snapshot_file="store.sqlite",
    ),
    Backend("memory", "wovyr.store.sqlite.backend:MEMORY", names=("memory://", "memory:")),
    Backend(
        "postgres",
        "wovyr.store.postgres.backend:DRIVER",
        prefixes=("postgresql://", "postgres://"),
        snapshot_file="store.pgdump",
        extra="postgres",
    ),
)


def backend_for(url: str) -> Backend:
    """The backend of the store URL `url` (`ConfigError` for an unknown one)."""
    for backend in BACKENDS:
        if backend.matches(url):
            return backend
    raise ConfigError(
        f"unknown store URL {url!r}",
        hint="use sqlite:///path/to/wovyr.db, postgresql://user@host/db or memory://",
    )


def backend_of_kind(kind: str) -> Backend:
    """The backend that backups of `kind` come from (`ConfigError` for any other kind)."""
    for backend in BACKENDS:
        if backend.kind == kind and backend.durable:
            return backend
    raise ConfigError(f"unknown store kind {kind!r} in the backup")


def restorable_url(url: str) -> Backend | None:
    """The backend of `url` when it names a store a backup can be restored into (None:
    not such a URL: a folder, `memory://`)."""
    for backend in BACKENDS:
        if backend.durable and backend.matches(url):
            return backend
    return None
