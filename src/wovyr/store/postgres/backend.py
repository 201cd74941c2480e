"""The PostgreSQL row of the backend table (`wovyr.store.backends`): `postgresql://` and
`postgres://` URLs. Snapshots are `pg_dump -Fc` files of the store's schema; a restore is
staged by renaming the target schema aside first (`wovyr.store.postgres.snapshot`)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from wovyr.store.backends import Driver
from wovyr.store.base import Store
from wovyr.store.postgres.queries import migrations
from wovyr.store.postgres.snapshot import (
    StagedSchema,
    check_dump,
    live_workers,
    scratch_restore,
    target_tables,
)
from wovyr.store.postgres.snapshot import (
    stage_restore as stage_schema,
)
from wovyr.store.postgres.store import PostgresStore

__all__ = ["DRIVER"]  # the functions are the driver's, by name (`Driver.of`)


def open_url(url: str, migrate: bool, db_clock: bool) -> Store:
    return PostgresStore(url, auto_migrate=migrate, db_clock=db_clock)


check_snapshot = check_dump  # pg_restore --list


def latest_migration() -> int:
    return max((version for version, _ in migrations()), default=0)


def snapshot_store(
    path: Path, server: str | None, dump_schema: str | None
) -> contextlib.AbstractContextManager[Store] | None:
    """The dump restored into a scratch database on the PostgreSQL server `server` for the
    time of the block (dropped after; nothing else on the server touched), opened as it
    was dumped (not migrated); None without such a server."""
    if server is None:
        return None
    return _scratch_store(path, server, dump_schema or "public")


@contextlib.contextmanager
def _scratch_store(dump: Path, server: str, dump_schema: str) -> Iterator[Store]:
    with scratch_restore(dump, server, dump_schema) as scratch:
        store = PostgresStore(scratch, auto_migrate=False)
        try:
            yield store
        finally:
            store.close()


def in_use(url: str) -> bool:
    return target_tables(url) > 0


def held(url: str, within_seconds: float) -> str | None:
    # a worker that reported lately (every server runs one)
    owners = live_workers(url, within_seconds)
    if not owners:
        return None
    return f"{len(owners)} worker(s) reported in the last {within_seconds:g} s: " + ", ".join(
        owners[:5]
    )


def stage_restore(snapshot: Path, url: str, dump_schema: str | None, force: bool) -> StagedSchema:
    return stage_schema(snapshot, url, dump_schema or "public", force=force)


DRIVER = Driver.of(__name__)
