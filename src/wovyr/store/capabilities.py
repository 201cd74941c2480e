"""What a store must do (the contract, checked at start-up) and what it may do besides.

`check_store(store)` refuses, with a `ConfigError` naming every missing method, a store
that does not implement the whole `wovyr.store.base.Store` contract; `open_store` and
`Engine` call it, so a partial store fails when it is opened, not at its first schedule.

The optional capabilities (only some backends have them, PostgreSQL all of them) are
declared here, and `capabilities(store)` answers which a store has. This module is the
only place that asks a store what it is (`isinstance` on these Protocols); everything else
asks `capabilities(store)` once and keeps the answer.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from functools import cache
from pathlib import Path
from typing import Protocol, runtime_checkable

from wovyr.errors import ConfigError
from wovyr.store.base import Store
from wovyr.store.frozen import record
from wovyr.store.records import CommitOutcome, ExecutionRecord, StepWrite, TimerRecord
from wovyr.store.shards import Peer

__all__ = [
    "Capabilities",
    "EventPartitioning",
    "EventPartitions",
    "Membership",
    "Migrating",
    "Notifying",
    "SnapshotInfo",
    "Snapshotting",
    "TimerLocking",
    "TimerSteps",
    "Wrapping",
    "capabilities",
    "check_store",
    "contract_methods",
]

TimerSteps = Callable[
    [list[TimerRecord], Mapping[tuple[str, str], ExecutionRecord]], list[StepWrite]
]
"""Build the steps that fire `timers`, given their executions keyed by (tenant, id)."""


@runtime_checkable
class TimerLocking(Protocol):
    """A store on which many dispatchers split the due timers instead of racing for them
    (PostgreSQL: `FOR UPDATE SKIP LOCKED`). In ONE transaction it locks up to `limit` due
    timer rows that no other dispatcher holds, loads their executions, lets `build` turn
    them into steps (one per execution) and applies those steps; it returns each step with
    its outcome. A dispatcher that dies mid-way leaves nothing locked."""

    def fire_timers(
        self, now: datetime, limit: int, build: TimerSteps
    ) -> list[tuple[StepWrite, CommitOutcome]]: ...


@runtime_checkable
class Membership(Protocol):
    """A store that keeps the live workers (PostgreSQL: the `worker_members` table)."""

    def worker_heartbeat(self, me: Peer, now: datetime, ttl_seconds: float) -> list[Peer]: ...

    def member_leave(self, owner: str) -> None: ...


@runtime_checkable
class Notifying(Protocol):
    """A store that can say when work may have arrived (PostgreSQL: LISTEN/NOTIFY)."""

    def wait_for_work(self, timeout: float) -> bool: ...


@runtime_checkable
class Migrating(Protocol):
    """A store with a schema of numbered migrations (SQLite, PostgreSQL)."""

    def migrate(self) -> int:
        """Apply the pending migrations; return the schema version."""
        ...

    def schema_version(self) -> int:
        """The highest migration applied (0: none)."""
        ...

    def latest_migration(self) -> int:
        """The highest migration this code ships."""
        ...

    def pending_migrations(self) -> list[int]:
        """The migrations this code ships that the schema has not applied yet."""
        ...


@record
class SnapshotInfo:
    """What `Snapshotting.snapshot` wrote: the store's kind (`sqlite`, `postgres`) and, on
    PostgreSQL, the schema the dump holds."""

    kind: str
    schema: str | None = None


@runtime_checkable
class Snapshotting(Protocol):
    """A store that writes a consistent copy of itself to one file while it keeps serving
    writers (SQLite: the online backup API, a few pages at a time; PostgreSQL: `pg_dump -Fc`
    of its schema, one snapshot). `wovyr.platform.backup` builds backups on it."""

    def snapshot(self, dest: Path) -> SnapshotInfo: ...


@record
class EventPartitions:
    """What one `keep_event_partitions` round changed: the partitions it created and the
    ones it dropped (table names)."""

    created: tuple[str, ...] = ()
    dropped: tuple[str, ...] = ()


@runtime_checkable
class EventPartitioning(Protocol):
    """A store whose events are partitioned by their execution's creation month
    (PostgreSQL): housekeeping creates the months ahead and drops past months that no
    execution is left in (`wovyr.store.postgres.partitions`)."""

    def keep_event_partitions(self, now: datetime) -> EventPartitions: ...


@record
class Capabilities:
    """The optional capabilities of one store: each is the store itself, typed as that
    capability, or None when the store does not have it."""

    timer_locking: TimerLocking | None = None
    membership: Membership | None = None
    notifications: Notifying | None = None
    migrations: Migrating | None = None
    snapshots: Snapshotting | None = None
    event_partitions: EventPartitioning | None = None


@runtime_checkable
class Wrapping(Protocol):
    """A store over another (the sealing store): it passes on the inner store's optional
    capabilities as it declares (`wrapped_capabilities`), never by forwarding names."""

    @property
    def inner(self) -> Store: ...

    def wrapped_capabilities(self, inner: Capabilities) -> Capabilities: ...


def capabilities(store: object) -> Capabilities:
    """Which optional capabilities `store` has (a wrapping store: those it passes on)."""
    if isinstance(store, Wrapping):
        return store.wrapped_capabilities(capabilities(store.inner))
    return Capabilities(
        timer_locking=store if isinstance(store, TimerLocking) else None,
        membership=store if isinstance(store, Membership) else None,
        notifications=store if isinstance(store, Notifying) else None,
        migrations=store if isinstance(store, Migrating) else None,
        snapshots=store if isinstance(store, Snapshotting) else None,
        event_partitions=store if isinstance(store, EventPartitioning) else None,
    )


@cache
def contract_methods() -> tuple[str, ...]:
    """Every method of the `Store` contract, role by role."""
    names: dict[str, None] = {}
    for role in Store.__mro__:
        if role is Protocol or not getattr(role, "_is_protocol", False):
            continue
        for name, value in vars(role).items():
            if not name.startswith("_") and callable(value):
                names[name] = None
    return tuple(names)


def check_store(store: object) -> None:
    """Raise `ConfigError` naming every method of the contract `store` lacks."""
    missing = [name for name in contract_methods() if not callable(getattr(store, name, None))]
    if not isinstance(getattr(store, "url", None), str):
        missing.append("url")
    if missing:
        raise ConfigError(
            f"store {type(store).__name__} does not implement the store contract: "
            f"missing {', '.join(missing)}",
            hint="a store implements every method of wovyr.store.base.Store",
        )
