"""Worker membership on PostgreSQL (mixed into PostgresStore): who is alive right now.

Workers started with `membership=True` call `member_heartbeat` on every heartbeat. The
answer is the sorted list of live members, from which each worker computes the same
partition assignment (`wovyr.worker.partitions.assign_partitions`). A member is live while
its last heartbeat is younger than `ttl_seconds`; an expired row is deleted by whoever
heartbeats next, so a worker that died leaves the list within one time to live.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

__all__ = ["Member", "PostgresMembers"]


@dataclass(frozen=True)
class Member:
    owner: str
    joined_at: datetime
    last_seen: datetime


class PostgresMembers:
    """Needs `_write_one()`, `_read()` and `_now()` from PostgresStore."""

    _write_one: Callable[[str, dict[str, Any]], list[Any]]
    _read: Callable[..., list[Any]]
    _now: Callable[[datetime], datetime | None]

    def member_heartbeat(self, owner: str, now: datetime, ttl_seconds: float) -> list[str]:
        """Record that `owner` is alive, drop expired members; return the live owners,
        sorted by code point (the same order on every host, whatever the collation)."""
        params = {"owner": owner, "now": self._now(now), "ttl": timedelta(seconds=ttl_seconds)}
        return sorted(row[0] for row in self._write_one("member_heartbeat", params))

    def member_leave(self, owner: str) -> None:
        """Leave the membership at once (a graceful shutdown), instead of expiring."""
        self._write_one("member_leave", {"owner": owner})

    def members(self, now: datetime, ttl_seconds: float) -> list[Member]:
        """The live members (for `wovyr` status displays and tests)."""
        params = {"now": self._now(now), "ttl": timedelta(seconds=ttl_seconds)}
        rows = self._read("members", params)
        found = [Member(r[0], r[1].astimezone(UTC), r[2].astimezone(UTC)) for r in rows]
        return sorted(found, key=lambda m: m.owner)
