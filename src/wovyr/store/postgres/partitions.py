"""The events table of the PostgreSQL store is partitioned by month (migration 0038): by the
*bucket* of the execution's creation time, so that all of one execution's events live in one
partition, a history read is pruned to it, and retention drops a whole month once no
execution created in it is left (mixed into PostgresStore). Its SQL lives in
`partitions.sql`; the bucket's SQL definition is `events_bucket` (migration 0038), this
module's `bucket_of` is the same in Python.

Dropping a partition takes an ACCESS EXCLUSIVE lock on `events` (DETACH ... CONCURRENTLY
cannot run in a transaction, nor beside a DEFAULT partition), which waits for in-flight
commits and holds new ones behind it; it is therefore tried with a short `lock_timeout`,
and a drop that cannot get the lock is left for later (the purge then deletes rows)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from functools import cache
from importlib import resources
from typing import Any

from psycopg import errors as pg_errors

from wovyr.store.capabilities import EventPartitions
from wovyr.store.postgres.queries import parse_queries
from wovyr.store.postgres.support import Connection

__all__ = [
    "DROP_LOCK_TIMEOUT",
    "MONTHS_AHEAD",
    "PostgresEventPartitions",
    "bucket_of",
    "drop_partition",
    "lock_events",
    "partition_name",
    "partition_queries",
]

MONTHS_AHEAD = 2  # partitions kept ready beyond this month's
DROP_LOCK_TIMEOUT = "2s"  # longest a drop holds the writers behind its lock request


def bucket_of(at: datetime) -> int:
    """The partition bucket of an execution created at `at`: its UTC month, counted as
    year * 12 + month - 1 (as `events_bucket` in SQL)."""
    utc = at.astimezone(UTC)
    return utc.year * 12 + utc.month - 1


def partition_name(bucket: int) -> str:
    """The table holding `bucket`'s events (as `events_partition_name` in SQL)."""
    return f"events_{bucket // 12}_{bucket % 12 + 1:02d}"


@cache
def partition_queries() -> dict[str, str]:
    text = (resources.files("wovyr.store.postgres") / "partitions.sql").read_text("utf-8")
    return parse_queries(text)


def lock_events(conn: Connection) -> bool:
    """Take the ACCESS EXCLUSIVE lock a partition drop needs, waiting at most
    DROP_LOCK_TIMEOUT (in a savepoint: a timeout leaves the caller's transaction usable);
    False when it could not."""
    q = partition_queries()
    try:
        with conn.transaction():
            row = conn.execute(q["lock_timeout"], {"timeout": DROP_LOCK_TIMEOUT}).fetchone()
            conn.execute(q["lock_events"])
            conn.execute(q["lock_timeout"], {"timeout": row[0] if row else "0"})
    except pg_errors.LockNotAvailable:
        return False
    return True


def drop_partition(conn: Connection, bucket: int) -> bool:
    """Detach and drop `bucket`'s partition if no execution of its month is left (checked
    under the lock, which the caller holds or this takes); True when it was dropped."""
    row = conn.execute(partition_queries()["drop_partition"], {"bucket": bucket}).fetchone()
    return bool(row and row[0])


class PostgresEventPartitions:
    """Needs `_write()` and `_run()` from PostgresStore."""

    _write: Callable[[Callable[[Connection], Any]], Any]
    _run: Callable[..., Any]

    def keep_event_partitions(self, now: datetime) -> EventPartitions:
        """Housekeeping: create this month's and the next MONTHS_AHEAD months' partitions
        (moving any of their rows out of DEFAULT), and drop every older month's partition
        that no execution is left in, each in its own transaction. A drop that cannot get
        its lock in time is left for the next round."""
        q = partition_queries()
        params = {"now": now, "ahead": MONTHS_AHEAD}

        def ensure(conn: Connection) -> list[str]:
            return [str(row[0]) for row in conn.execute(q["ensure_partitions"], params)]

        created: list[str] = self._write(ensure)

        def listed(conn: Connection) -> list[tuple[str, int]]:
            return [(str(r[0]), int(r[1])) for r in conn.execute(q["partitions"]).fetchall()]

        current = bucket_of(now)
        dropped: list[str] = []
        for name, bucket in self._run(listed, write=False):
            if bucket >= current or self._bucket_in_use(bucket):
                continue

            def drop(conn: Connection, bucket: int = bucket) -> bool:
                return lock_events(conn) and drop_partition(conn, bucket)

            if self._write(drop):
                dropped.append(name)
        return EventPartitions(tuple(created), tuple(dropped))

    def _bucket_in_use(self, bucket: int) -> bool:
        """A cheap look without the lock (the drop looks again under it)."""

        def body(conn: Connection) -> bool:
            row = conn.execute(partition_queries()["bucket_in_use"], {"bucket": bucket})
            found = row.fetchone()
            return bool(found and found[0])

        return bool(self._run(body, write=False))
