"""The work queue's claim, once for both SQL stores (the contract is `Store.claim`): what a
claim asks is read here into a `ClaimAsk`; each store leases the rows in its own SQL
(`_claim`: one statement, or a few in one transaction), since the two claim queries differ
in every line (row locks and SKIP LOCKED, rowid, arrays or JSON)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from wovyr.store.base import DEFAULT_TENANT, Claim, FairShare
from wovyr.store.hooks import Observers
from wovyr.store.shards import shards_for

__all__ = ["ClaimAsk", "SQLQueue"]


@dataclass(frozen=True, slots=True)
class ClaimAsk:
    """One claim: lease up to `limit` claimable executions to `owner` for `lease` from
    `now`; of `only` (ids of `tenant`) when given, else in `fair`'s share when given (never
    both), within `shards` (None: every shard)."""

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


class SQLQueue:
    """Needs `_claim` and `_observers` from its store."""

    _claim: Callable[[ClaimAsk], list[Claim]]
    _observers: Observers

    def claim(
        self,
        owner: str,
        now: datetime,
        lease_seconds: float,
        limit: int,
        only: Sequence[str] | None = None,
        *,
        tenant: str = DEFAULT_TENANT,
        partitions: Sequence[int] | None = None,
        of: int | None = None,
        fair: FairShare | None = None,
    ) -> list[Claim]:
        lease = timedelta(seconds=lease_seconds)
        shards = shards_for(partitions, of)
        fair = fair if only is None else None
        claims = self._claim(ClaimAsk(owner, now, lease, limit, only, tenant, shards, fair))
        self._observers.claimed(claims)
        return claims
