"""Fair share between tenants, the worker's side: who gets the next slots, decided here so
that each claim is one indexed statement.

`FairClaimer` keeps the tenants with claimable work (`Store.claimable_tenants`, one look
through the ready index by tenant) and a rotating cursor over them. Each claim decides its
turns in memory (`plan_turns`: a tenant's k-th slot scores (held + k) / weight, the lowest
scores win, ties go round the cursor, a tenant's cap bounds it) and leases them with one
statement that probes only those tenants (`FairShare.turns`), instead of looking through
every tenant with ready work on every claim.

The list of tenants is looked up again, not on every claim:

- when a claim comes back short: a tenant that yielded fewer executions than its turns
  has no more claimable work and leaves the list; an empty answer (or nothing to plan)
  looks again at once and claims once more, so a claim answers nothing only when no
  tenant has claimable work;
- after `refresh_claims` claims or `refresh_seconds`, so a tenant whose work was started
  elsewhere (another process) waits at most that long for its turn (a look costs two
  index probes per tenant with ready work: with 100 such tenants about a claim's cost);
- a tenant this process saw work arrive for (`hint`) joins the list at once.

`TenantShares` gives each tenant's weight and slot cap: what the host's administrator
stored with the tenant (`wovyr admin quotas set T --weight W --max-slots N`), read at most
once per `ttl` seconds, with the worker's own settings as the default (`tenant_weights`)
and the ceiling (`max_per_tenant`). A tenant's stored `max_running` (`--max-running N`: its
executions leased at once by all workers) bounds its cap here too, and goes with the
claim (`FairShare.max_running`), which the store enforces against every worker's leases.
A tenant at that cap yields fewer than its turns and leaves the list until the next look.
"""

from __future__ import annotations

import bisect
import heapq
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace

from wovyr.engine.quotas import DEFAULT_WEIGHT, stored_quotas
from wovyr.store.base import Claim, ClaimAsk, FairShare, Store
from wovyr.store.platform import TenantStore
from wovyr.store.records import MAX_TURN_TENANTS

__all__ = ["FairClaimer", "TenantShares", "plan_turns"]


def plan_turns(
    tenants: Sequence[str],
    held: Mapping[str, int],
    limit: int,
    shares: TenantShares | None = None,
    *,
    start: int = 0,
) -> dict[str, int]:
    """How many of `limit` slots each of `tenants` (those with claimable work) gets: slot k
    of tenant t scores (held[t] + k) / weight(t), the `limit` lowest scores win, a tenant
    never passes its cap (held + turns), ties go to the tenant first after `start` in
    `tenants` (the cursor), and at most `MAX_TURN_TENANTS` tenants get a turn. This is
    `FairShare`'s rule, decided without reading any row."""
    shares = shares or _EQUAL
    if not tenants or limit <= 0:
        return {}
    if shares.uniform:
        return _level_turns(tenants, held, limit, shares.ceiling, start)
    return _scored_turns(tenants, held, limit, shares, start)


def _level_turns(
    tenants: Sequence[str], held: Mapping[str, int], limit: int, cap: int | None, start: int
) -> dict[str, int]:
    """`plan_turns` when every tenant has the same weight and cap: fill the tenants holding
    the fewest up to the next level, a level at a time (no score per slot). Tenants are
    grouped by what they hold, each group in the cursor's order (no sort of the tenants:
    this runs on every claim)."""
    top = cap if cap is not None else limit + max(held.values(), default=0)
    order = [*tenants[start:], *tenants[:start]] if start else tenants  # the cursor's order
    groups: dict[int, list[str]] = {}
    for tenant in order:
        have = held.get(tenant, 0)
        if have < top:
            groups.setdefault(have, []).append(tenant)
    waiting = [(have, t) for have in sorted(groups) for t in groups[have]][:MAX_TURN_TENANTS]
    if not waiting:
        return {}
    left, level, filled = limit, waiting[0][0], 0  # tenants at `level` are waiting[:filled]
    while left > 0:
        while filled < len(waiting) and waiting[filled][0] <= level:
            filled += 1
        ceiling = waiting[filled][0] if filled < len(waiting) else top
        rounds = min(ceiling - level, left // filled, top - level)
        if rounds <= 0:
            break
        level += rounds
        left -= rounds * filled
    turns = {t: level - have for have, t in waiting[:filled] if level > have}
    if left > 0 and level < top:  # a part round at `level`: the cursor's order
        served = {t for _, t in waiting[:filled]}
        for tenant in order:
            if tenant in served:
                turns[tenant] = turns.get(tenant, 0) + 1
                left -= 1
                if not left:
                    break
    return turns


def _scored_turns(
    tenants: Sequence[str],
    held: Mapping[str, int],
    limit: int,
    shares: TenantShares,
    start: int,
) -> dict[str, int]:
    """`plan_turns` with weights or caps of their own: the lowest scores, slot by slot."""
    count = len(tenants)
    heap: list[tuple[float, int, str, float, int | None]] = []
    for i, tenant in enumerate(tenants):
        have, most, weight = held.get(tenant, 0), shares.cap(tenant), shares.weight(tenant)
        if most is None or have < most:
            heap.append(((have + 1) / weight, (i - start) % count, tenant, weight, most))
    heapq.heapify(heap)
    turns: dict[str, int] = {}
    while heap and limit > 0:
        _, order, tenant, weight, most = heapq.heappop(heap)
        if tenant not in turns and len(turns) >= MAX_TURN_TENANTS:
            continue
        turns[tenant] = n = turns.get(tenant, 0) + 1
        limit -= 1
        have = held.get(tenant, 0) + n
        if most is None or have < most:
            heapq.heappush(heap, ((have + 1) / weight, order, tenant, weight, most))
    return turns


class TenantShares:
    """Tenants' fair-share weights and slot caps: stored with the tenant (its quotas'
    `weight`, `max_slots` and `max_running`), read with one `list_tenants` at most every
    `ttl` seconds;
    `weights` (the worker's `tenant_weights`) for tenants with no stored weight, default 1;
    `ceiling` (the worker's `max_per_tenant`) bounds every cap."""

    def __init__(
        self,
        store: TenantStore | None,
        *,
        weights: Mapping[str, float] | None = None,
        ceiling: int | None = None,
        ttl: float = 2.0,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store = store
        self.weights = dict(weights or {})
        self.ceiling = ceiling
        self.ttl = ttl
        self._monotonic = monotonic
        self._read_at: float | None = None
        self._stored: dict[str, tuple[float | None, int | None]] = {}
        self._running: dict[str, int] = {}  # stored max_running, by tenant
        self._lock = threading.Lock()

    def refresh(self, force: bool = False) -> None:
        """Read the stored settings again if `ttl` passed (or `force`)."""
        now = self._monotonic()
        if self.store is None:
            return
        if not force and self._read_at is not None and now - self._read_at < self.ttl:
            return
        stored, running = {}, {}
        for record in self.store.list_tenants():
            quotas = stored_quotas(record.quotas)
            if quotas.max_running is not None:
                running[record.tenant] = quotas.max_running
            slots = _least(quotas.max_slots, quotas.max_running)
            if quotas.weight is not None or slots is not None:
                stored[record.tenant] = (quotas.weight, slots)
        with self._lock:
            self._stored, self._running, self._read_at = stored, running, now

    @property
    def uniform(self) -> bool:
        """Every tenant has weight 1 and the ceiling as its cap (nothing else is set)."""
        return not self._stored and not self.weights

    def weight(self, tenant: str) -> float:
        weight = self._stored.get(tenant, (None, None))[0]
        return weight if weight is not None else self.weights.get(tenant, DEFAULT_WEIGHT)

    def max_running(self, tenants: Iterable[str]) -> dict[str, int]:
        """The stored `max_running` of those of `tenants` that have one: what the claim
        holds each to, counting the leases of every worker."""
        running = self._running
        if not running:
            return {}
        return {t: running[t] for t in tenants if t in running}

    def cap(self, tenant: str) -> int | None:
        stored = self._stored.get(tenant, (None, None))[1]
        if stored is None or self.ceiling is None:
            return stored if stored is not None else self.ceiling
        return min(stored, self.ceiling)


class FairClaimer:
    """A worker's fair claim (module docstring). Not thread-safe but for `hint`: one claim
    at a time (the worker's claims run one after the other)."""

    def __init__(
        self,
        store: Store,
        shares: TenantShares | None = None,
        *,
        refresh_claims: int = 64,
        refresh_seconds: float = 1.0,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store = store
        self.shares = shares or TenantShares(None)
        self.refresh_claims = refresh_claims
        self.refresh_seconds = refresh_seconds
        self._monotonic = monotonic
        self._tenants: list[str] = []  # with claimable work at the last look (by name)
        self._after = ""  # ties start at the first tenant from this name on (the cursor)
        self._claims = 0  # since the last look
        self._looked_at: float | None = None
        self._hinted: set[str] = set()
        self._lock = threading.Lock()
        self.looks = 0  # how many times the tenants were looked up (for tests and benches)

    @property
    def tenants(self) -> list[str]:
        """The tenants this claimer serves in turn now."""
        return list(self._tenants)

    def hint(self, tenant: str) -> None:
        """Work of `tenant` may have become claimable (safe from any thread)."""
        with self._lock:
            self._hinted.add(tenant)

    def claim(self, ask: ClaimAsk, held: Mapping[str, int]) -> list[Claim]:
        """Lease up to `ask.limit` executions fairly (in `ask`'s partitions; its `fair` is
        set here), given the slots each tenant `held`."""
        if ask.limit <= 0:
            return []
        looked = False
        if self._due():
            self._look(ask)
            looked = True
        self._take_hints()
        got = self._claim_turns(ask, held)
        if not got and not looked:
            # Nothing to plan, or the tenants planned had nothing left: look and try once
            # more, so an empty answer means no tenant has claimable work.
            self._look(ask)
            got = self._claim_turns(ask, held)
        self._claims += 1
        return got

    def _due(self) -> bool:
        if self._looked_at is None or not self._tenants:
            return True
        if self._claims >= self.refresh_claims:
            return True
        return self._monotonic() - self._looked_at >= self.refresh_seconds

    def _look(self, ask: ClaimAsk) -> None:
        self._tenants = self.store.claimable_tenants(ask.now, partitions=ask.partitions, of=ask.of)
        self._claims, self._looked_at = 0, self._monotonic()
        self.looks += 1
        self.shares.refresh()

    def _take_hints(self) -> None:
        with self._lock:
            hinted, self._hinted = self._hinted, set()
        if hinted - set(self._tenants):
            self._tenants = sorted(set(self._tenants) | hinted)

    def _claim_turns(self, ask: ClaimAsk, held: Mapping[str, int]) -> list[Claim]:
        """One claim of up to `ask.limit` executions, by turns planned over the tenants seen."""
        tenants = self._tenants
        start = bisect.bisect_left(tenants, self._after)
        turns = plan_turns(tenants, held, ask.limit, self.shares, start=start)
        if not turns:
            return []
        fair = FairShare(turns=turns, max_running=self.shares.max_running(turns))
        got = self.store.claim(replace(ask, fair=fair))
        counts = Counter(c.tenant for c in got)
        short = {t for t, n in turns.items() if counts[t] < n}
        # The cursor moves past the last tenant served, so ties go round.
        positions = {t: i for i, t in enumerate(tenants)}
        last = max(turns, key=lambda t: (positions[t] - start) % len(tenants))
        self._after = tenants[(positions[last] + 1) % len(tenants)]
        if short:
            self._tenants = [t for t in tenants if t not in short]
        return got


def _least(*limits: int | None) -> int | None:
    """The lowest of the limits that are set (None: none is)."""
    return min((n for n in limits if n is not None), default=None)


_EQUAL = TenantShares(None)
