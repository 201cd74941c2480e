"""Worker membership on PostgreSQL (mixed into PostgresStore): who is alive right now.

Every worker on PostgreSQL calls `worker_heartbeat` on every heartbeat, saying how it
chooses what to claim (`mode`: member, fixed or all). The answer is every live worker;
those with mode 'member' are the membership, from which each of them computes the same
partition assignment (`wovyr.worker.partitions.assign_partitions`), and all of them
together tell whether some partition has no live worker (`shards.coverage_problems`). A
worker is live while its last heartbeat is younger than `ttl_seconds`; an expired row is
deleted by whoever heartbeats next, so a worker that died leaves the list within one time
to live.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from wovyr.store.frozen import record
from wovyr.store.shards import Peer

__all__ = ["Member", "PostgresMembers"]


@record
class Member:
    owner: str
    joined_at: datetime
    last_seen: datetime
    mode: str = "member"


class PostgresMembers:
    """Needs `_write_one()`, `_read()` and `_now()` from PostgresStore."""

    _write_one: Callable[[str, dict[str, Any]], list[Any]]
    _read: Callable[..., list[Any]]
    _now: Callable[[datetime], datetime | None]

    def worker_heartbeat(self, me: Peer, now: datetime, ttl_seconds: float) -> list[Peer]:
        """Record that `me` is alive (and how it claims), drop expired rows; return every
        live worker, sorted by owner in code point order (the same on every host,
        whatever the collation)."""
        params = {
            "owner": me.owner,
            "mode": me.mode,
            "of": me.of,
            "partitions": list(me.partitions),
            "now": self._now(now),
            "ttl": timedelta(seconds=ttl_seconds),
        }
        rows = self._write_one("member_heartbeat", params)
        peers = [Peer(r[0], r[1], r[2], tuple(r[3] or ())) for r in rows]
        return sorted(peers, key=lambda p: p.owner)

    def member_heartbeat(self, owner: str, now: datetime, ttl_seconds: float) -> list[str]:
        """`worker_heartbeat` for a membership worker: the live members' owners, sorted."""
        peers = self.worker_heartbeat(Peer(owner, "member"), now, ttl_seconds)
        return [p.owner for p in peers if p.mode == "member"]

    def member_leave(self, owner: str) -> None:
        """Leave the membership at once (a graceful shutdown), instead of expiring."""
        self._write_one("member_leave", {"owner": owner})

    def members(self, now: datetime, ttl_seconds: float) -> list[Member]:
        """The live workers, every mode (for `wovyr` status displays and tests)."""
        params = {"now": self._now(now), "ttl": timedelta(seconds=ttl_seconds)}
        rows = self._read("members", params)
        found = [Member(r[0], r[1].astimezone(UTC), r[2].astimezone(UTC), r[3]) for r in rows]
        return sorted(found, key=lambda m: m.owner)
