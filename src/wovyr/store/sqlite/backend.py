"""The SQLite row of the backend table (`wovyr.store.backends`): a `sqlite:///path` file,
and `memory://` (a SQLite store in a private temporary folder, gone when it is closed).

A restore is staged as a hidden temporary file beside the target database; `commit` moves
the old database (with its -wal: it belongs to it) aside as `<name>.pre-restore` and the
restored file into its place.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
from collections.abc import Iterator
from pathlib import Path

from wovyr.errors import ConfigError, Conflict
from wovyr.store.backends import Driver
from wovyr.store.base import Store
from wovyr.store.sqlite.snapshot import check_file, open_elsewhere
from wovyr.store.sqlite.store import SQLiteStore, _migrations

__all__ = ["DRIVER", "MEMORY"]  # the functions are the driver's, by name (`Driver.of`)

_PREFIX = "sqlite:///"
_SIDE_FILES = ("-wal", "-shm", "-journal")


def _path(url: str) -> Path:
    return Path(url[len(_PREFIX) :]).expanduser()  # sqlite:////abs or sqlite:///rel


def open_url(url: str, migrate: bool, db_clock: bool) -> Store:
    # the embedded store always migrates itself; its leases use the engine's clock
    if not url[len(_PREFIX) :]:
        raise ConfigError("a sqlite URL needs a path: sqlite:///path/to/wovyr.db")
    return SQLiteStore(_path(url))


def _open_memory(url: str, migrate: bool, db_clock: bool) -> Store:
    return SQLiteStore()


check_snapshot = check_file  # PRAGMA integrity_check


def latest_migration() -> int:
    return max((version for version, _ in _migrations()), default=0)


@contextlib.contextmanager
def snapshot_store(path: Path, server: str | None, dump_schema: str | None) -> Iterator[Store]:
    store = SQLiteStore(path)  # a copy: opened (and migrated) where it is
    try:
        yield store
    finally:
        store.close()


def in_use(url: str) -> bool:
    path = _path(url)
    return path.exists() and path.stat().st_size > 0


def held(url: str, within_seconds: float) -> str | None:
    # any connection to the file (of any process, this one included)
    path = _path(url)
    return f"{path} is open in another connection" if open_elsewhere(path) else None


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
        return f"{_PREFIX}{self.tmp}"

    def commit(self) -> None:
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


def stage_restore(snapshot: Path, url: str, dump_schema: str | None, force: bool) -> _StagedFile:
    if in_use(url) and not force:
        raise Conflict(
            f"the target store {_path(url)} is not empty",
            hint="restore into an empty home, or give --force to replace it (stop every "
            "server and worker using it first)",
        )
    return _StagedFile(snapshot, _path(url))


DRIVER = Driver.of(__name__)
MEMORY = Driver.of(__name__, open_url=_open_memory)
