"""The work queue's claim and lease renewal, once for both SQL stores (the contract is
`Store.claim`): what a claim asks is read here into a `ClaimPlan`; each store leases the
rows in its own SQL (`_claim`: one statement, or a few in one transaction), since the two
claim queries differ in every line (row locks and SKIP LOCKED, rowid, arrays or JSON). Its
SQL lives in `queue.sql`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from wovyr.store.base import Claim, ClaimAsk, ExecutionKey, FairShare, LeaseState
from wovyr.store.hooks import Observers
from wovyr.store.shards import shards_for
from wovyr.store.sql import SQLRole

__all__ = ["ClaimPlan", "SQLQueue"]


@dataclass(frozen=True, slots=True)
class ClaimPlan:
    """A `ClaimAsk` as the SQL stores run it: lease up to `limit` claimable executions to
    `owner` for `lease` from `now`; of `only` (ids of `tenant`) when given, else in `fair`'s
    share when given (never both), within `shards` (None: every shard)."""

    owner: str
    now: datetime
    lease: timedelta
    limit: int
    only: Sequence[str] | None
    tenant: str
    shards: frozenset[int] | None
    fair: FairShare | None

    @property
    def until(self) -> datetime:
        return self.now + self.lease


class SQLQueue(SQLRole):
    """Needs `_claim` and `_observers` from its store."""

    _claim: Callable[[ClaimPlan], list[Claim]]
    _observers: Observers

    def claim(self, ask: ClaimAsk) -> list[Claim]:
        lease = timedelta(seconds=ask.lease_seconds)
        shards = shards_for(ask.partitions, ask.of)
        fair = ask.fair if ask.only is None else None
        plan = ClaimPlan(ask.owner, ask.now, lease, ask.limit, ask.only, ask.tenant, shards, fair)
        claims = self._claim(plan)
        self._observers.claimed(claims)
        return claims

    def renew_leases(
        self, owner: str, now: datetime, lease_seconds: float
    ) -> dict[ExecutionKey, LeaseState]:
        sql = self._queries("queue")["renew_leases"]
        params = {"owner": owner, **self._lease(now, timedelta(seconds=lease_seconds))}
        rows = self._sql_write_one(sql, params)
        return {(r["tenant"], r["id"]): LeaseState(fence=r["fence"], seq=r["seq"]) for r in rows}
