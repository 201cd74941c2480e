"""Flow control in the store, shared by every worker of every host.

- Workflow concurrency keys (`SlotRequest`, `SlotRelease`): a start takes a slot of its key
  in its creating transaction or waits for one; the step that ends it hands the slot on in
  start order. The writes ride on `create_execution` and `commit`; `slot_state` reads.
- Activity gates (`acquire_flow`, checked by a worker right before it starts attempts):
  a rate-limit token bucket per (tenant, key) (`RateRequest`) and activity concurrency
  slots (`SlotClaim`), all granted in one transaction or none. A refusal says how long to
  wait and why; the worker then holds the attempts with a durable timer (they take no
  worker slot and are not retries). An activity slot counts while its execution's lease
  is still held by the worker that took it (a crashed worker's slots come back when its
  leases expire); the step that records the attempt's result deletes it
  (`StepWrite.flow_released`).
- Gates in the step (`commit_gated`): a step that starts gated attempts carries their
  gate (`StepWrite.gate`) and the store takes it in the step's own transaction, so a gated
  attempt costs no transaction of its own: granted, the step is written; refused, nothing
  of the step is (`CommitOutcome.HELD`) and the refusal comes back in its place.
- Admin-declared buckets (`set_rate_limit`): a bucket an activity names by key, with the
  capacity and rate the tenant's admin set (they win over an activity's own numbers).

The bucket arithmetic (`Bucket.take`) is here, so that every store answers alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Protocol

from wovyr.store.audit import AuditEntry
from wovyr.store.records import CommitOutcome, SlotState, StepWrite

__all__ = [
    "NEVER",
    "SLOT_RECHECK_SECONDS",
    "WAITER_TTL_SECONDS",
    "Bucket",
    "FlowAcquire",
    "FlowAnswer",
    "FlowKey",
    "FlowStore",
    "GateBook",
    "GatedOutcome",
    "RateLimitRecord",
    "RateRequest",
    "SlotClaim",
    "decide_flow",
    "plain_outcomes",
    "rate_refused",
    "slot_blocked",
    "slot_refused",
    "tight_keys",
]

SLOT_RECHECK_SECONDS = 0.5  # how soon an attempt refused an activity slot looks again
NEVER = 3600.0  # the wait of a request no bucket can ever grant (it looks again hourly)
# An attempt waiting for an activity slot keeps its place in the key's queue while it comes
# back (every SLOT_RECHECK_SECONDS) within this long and its execution has not ended; one
# that did not (held longer by a rate limit, its execution cancelled, workers too busy to
# fire its timer) loses its place, so a vanished waiter keeps no slot from the others.
WAITER_TTL_SECONDS = 5.0


@dataclass(frozen=True)
class RateRequest:
    """`units` from bucket `key`; `capacity` and `per_second` as the activity declares them
    (None: the bucket must have been declared by an admin)."""

    key: str
    units: float = 1.0
    capacity: float | None = None
    per_second: float | None = None


@dataclass(frozen=True)
class SlotClaim:
    """A slot of activity concurrency key `key` (at most `limit` held) for `holder` (the
    attempt's idempotency key)."""

    key: str
    holder: str
    limit: int


@dataclass(frozen=True)
class FlowAcquire:
    """One `acquire_flow` call, for `acquire_flows` (many in one transaction)."""

    tenant: str
    execution_id: str
    owner: str
    now: datetime
    rates: Sequence[RateRequest] = ()
    slots: Sequence[SlotClaim] = ()


@dataclass(frozen=True)
class FlowAnswer:
    """Granted, or how long to wait (seconds) and why ("rate limit openai: next slot in
    3.2 s", "concurrency k: 2 running (a, b)")."""

    granted: bool
    wait: float = 0.0
    reason: str = ""


@dataclass(frozen=True)
class FlowKey:
    """A concurrency key a tenant uses now: `kind` `workflow` (executions holding a slot or
    waiting for one) or `activity` (attempts running with a slot, and those waiting)."""

    kind: str
    key: str
    running: int
    waiting: int


@dataclass(frozen=True)
class RateLimitRecord:
    """A tenant's token bucket: `capacity` units (the burst), refilled at `per_second`;
    `declared` by an admin, or made by the first activity that named it."""

    tenant: str
    key: str
    capacity: float
    per_second: float
    tokens: float
    declared: bool
    updated_by: str = ""


@dataclass(frozen=True)
class Bucket:
    """A bucket's row: `tokens` as of `refilled_at` and when the last waiter was told to
    look again (`wake_at`), both in seconds since 1970."""

    capacity: float
    per_second: float
    tokens: float
    refilled_at: float
    wake_at: float = 0.0
    declared: bool = False

    def refill(self, now: float) -> Bucket:
        """The bucket as of `now`: refilled at its rate, up to its capacity."""
        gained = max(0.0, now - self.refilled_at) * self.per_second
        return self.holding(min(self.capacity, self.tokens + gained), max(now, self.refilled_at))

    def holding(self, tokens: float, refilled_at: float | None = None) -> Bucket:
        """This bucket with `tokens` (as of `refilled_at`, default its own): built directly,
        as `dataclasses.replace` costs several times more on the gates' hot path."""
        at = self.refilled_at if refilled_at is None else refilled_at
        return Bucket(self.capacity, self.per_second, tokens, at, self.wake_at, self.declared)

    def wait_for(self, units: float, now: float) -> tuple[Bucket, float]:
        """For a refilled bucket short of `units`: when the request should look again (its
        deficit at the refill rate, and after the last waiter told before it, so that
        waiters look one at a time instead of all at once), and the bucket that remembers
        it. A request above the capacity waits `NEVER`."""
        if units > self.capacity:
            return self, NEVER
        step = units / self.per_second
        wake = max(now + (units - self.tokens) / self.per_second, self.wake_at + step)
        return replace(self, wake_at=wake), wake - now


def rate_refused(key: str, wait: float) -> str:
    if wait >= NEVER:
        return f"rate limit {key}: asks more units than the bucket holds"
    return f"rate limit {key}: next slot in {wait:.1f} s"


def slot_refused(key: str, limit: int, holders: Sequence[str], ahead: int = 0) -> str:
    names = ", ".join(holders)
    if len(holders) >= limit:
        text = f"concurrency {key}: {limit} running ({names})"
    else:
        running = f" ({names})" if names else ""
        text = f"concurrency {key}: {len(holders)} of {limit} running{running}"
    return f"{text}, {ahead} waiting before it" if ahead else text  # one waiting_on clause


def slot_blocked(
    claim: SlotClaim, holders: dict[str, list[str]], waiters: dict[str, list[str]]
) -> str | None:
    """Why `claim` cannot have a slot now (None: it can): its key's slots are held, or the
    free ones are kept for the attempts that began to wait before it (`waiters`, oldest
    first; a slot that frees goes to the oldest)."""
    held = holders.get(claim.key, [])
    if claim.holder in held:
        return None
    queue = waiters.get(claim.key, [])
    ahead = queue.index(claim.holder) if claim.holder in queue else len(queue)
    if len(held) + ahead < claim.limit:
        return None
    return slot_refused(claim.key, claim.limit, held, ahead)


def decide_flow(
    buckets: dict[str, Bucket | None],
    rates: Sequence[RateRequest],
    holders: dict[str, list[str]],
    slots: Sequence[SlotClaim],
    now: float,
    waiters: dict[str, list[str]] | None = None,
) -> tuple[FlowAnswer, dict[str, Bucket]]:
    """What `acquire_flow` answers, given the buckets' rows (None: not made yet), the
    attempts holding each slot key now and those waiting for one (oldest first); and the
    rows to write back: refilled, less the units taken when granted (a refusal takes
    nothing and remembers the waiter's look)."""
    refusals: list[tuple[float, str]] = []
    states: dict[str, Bucket] = {}
    need: dict[str, float] = {}
    for request in rates:
        bucket = states.get(request.key) or buckets.get(request.key)
        declared = bucket is not None and bucket.declared
        if not declared and request.capacity is not None and request.per_second is not None:
            # made (or reshaped) by the activity that names it
            bucket = Bucket(
                capacity=request.capacity,
                per_second=request.per_second,
                tokens=request.capacity if bucket is None else bucket.tokens,
                refilled_at=now if bucket is None else bucket.refilled_at,
                wake_at=0.0 if bucket is None else bucket.wake_at,
            )
        if bucket is None:
            refusals.append((NEVER, f"rate limit {request.key}: no such bucket"))
            continue
        states[request.key] = bucket.refill(now)
        need[request.key] = need.get(request.key, 0.0) + request.units
    for key, units in need.items():
        bucket = states[key]
        if bucket.tokens < units:
            states[key], wait = bucket.wait_for(units, now)
            refusals.append((wait, rate_refused(key, wait)))
    for claim in slots:
        blocked = slot_blocked(claim, holders, waiters or {})
        if blocked is not None:
            refusals.append((SLOT_RECHECK_SECONDS, blocked))
    if refusals:
        wait, reason = max(refusals)
        return FlowAnswer(granted=False, wait=wait, reason=reason), states
    taken = {k: b.holding(b.tokens - need[k]) for k, b in states.items()}
    return FlowAnswer(granted=True), taken


def tight_keys(
    asks: Sequence[FlowAcquire], counts: dict[tuple[str, str], int]
) -> set[tuple[str, str]]:
    """The slot keys, by (tenant, key), whose rows (`counts`, stale ones included) plus one
    for every holder `asks` name could pass the smallest limit asked: only their live
    holders need reading (each holder's lease looked at). Any other key has room for every
    ask of the batch, however many of its rows are stale."""
    asked: dict[tuple[str, str], set[str]] = {}
    limit: dict[tuple[str, str], int] = {}
    for ask in asks:
        for c in ask.slots:
            key = (ask.tenant, c.key)
            asked.setdefault(key, set()).add(c.holder)
            limit[key] = min(limit.get(key, c.limit), c.limit)
    return {k for k, holders in asked.items() if counts.get(k, 0) + len(holders) > limit[k]}


class GateBook:
    """The gates of one transaction's asks, decided one after the other on the rows the
    store read (and locked) for all of them at once: `buckets` and the live `holders` of
    each slot key, by (tenant, key), as of `at` (seconds since 1970); a key with room for
    every ask (not one of `tight_keys`) may be given as no holders. `undo` gives back what
    an ask whose step did not apply was granted; `changed` and `takes` are what the store
    writes back (bucket rows; activity slot rows of the asks still granted)."""

    def __init__(
        self,
        at: float,
        buckets: dict[tuple[str, str], Bucket],
        holders: dict[tuple[str, str], list[str]],
        waiters: dict[tuple[str, str], list[str]] | None = None,
        queues: set[tuple[str, str]] | None = None,
    ) -> None:
        self.at = at
        # the slot keys with waiter rows (None: maybe any): only their takes leave a queue
        self.queues = queues
        self._buckets = buckets
        self._holders = holders
        self._waiters = waiters or {}
        self._changed: set[tuple[str, str]] = set()
        self._granted: dict[int, tuple[FlowAcquire, dict[str, float]]] = {}
        # (tenant, key, holder) -> execution id: refused a slot, in the queue (until TTL)
        self._queued: dict[tuple[str, str, str], str] = {}

    def decide(self, ask: FlowAcquire) -> FlowAnswer:
        t = ask.tenant
        mine: dict[str, Bucket | None] = {
            r.key: self._buckets[(t, r.key)] for r in ask.rates if (t, r.key) in self._buckets
        }
        held = {c.key: self._holders.setdefault((t, c.key), []) for c in ask.slots}
        queue = {c.key: self._waiters.setdefault((t, c.key), []) for c in ask.slots}
        answer, states = decide_flow(mine, ask.rates, held, ask.slots, self.at, queue)
        for key, b in states.items():
            self._buckets[(t, key)] = b
            self._changed.add((t, key))
        if answer.granted:
            need: dict[str, float] = {}
            for r in ask.rates:
                need[r.key] = need.get(r.key, 0.0) + r.units
            for c in ask.slots:
                if c.holder not in held[c.key]:
                    held[c.key].append(c.holder)
                if c.holder in queue[c.key]:
                    queue[c.key].remove(c.holder)
                self._queued.pop((t, c.key, c.holder), None)
            self._granted[id(ask)] = (ask, need)
            return answer
        for c in ask.slots:  # a claim refused its slot joins (or stays in) the key's queue
            if slot_blocked(c, held, queue) is not None:
                if c.holder not in queue[c.key]:
                    queue[c.key].append(c.holder)
                self._queued[(t, c.key, c.holder)] = ask.execution_id
        return answer

    def queued(self) -> list[tuple[str, str, str, str]]:
        """The waiters to record (tenant, key, holder, execution id): new ones at the end
        of their key's queue, the others kept in place (their `until` moved on)."""
        return [(t, k, h, e) for (t, k, h), e in self._queued.items()]

    def undo(self, ask: FlowAcquire) -> None:
        """Give back what `ask` was granted (its step did not apply)."""
        granted = self._granted.pop(id(ask), None)
        if granted is None:
            return
        for key, units in granted[1].items():
            b = self._buckets[(ask.tenant, key)]
            self._buckets[(ask.tenant, key)] = b.holding(min(b.capacity, b.tokens + units))
        for c in ask.slots:
            held = self._holders[(ask.tenant, c.key)]
            if c.holder in held:
                held.remove(c.holder)

    def changed(self) -> list[tuple[tuple[str, str], Bucket]]:
        """The bucket rows to write, by (tenant, key)."""
        return [(key, self._buckets[key]) for key in sorted(self._changed)]

    def takes(self) -> list[tuple[FlowAcquire, SlotClaim]]:
        """The activity slots granted (to asks not undone)."""
        return [(ask, c) for ask, _ in self._granted.values() for c in ask.slots]

    def served(self) -> list[tuple[FlowAcquire, SlotClaim]]:
        """The takes whose waiter rows, if any, go (those of keys with a queue)."""
        queues = self.queues
        takes = self.takes()
        return (
            takes if queues is None else [(a, c) for a, c in takes if (a.tenant, c.key) in queues]
        )


#: What `commit_gated` answers for one step: its outcome, or its gate's refusal.
GatedOutcome = CommitOutcome | FlowAnswer


def plain_outcomes(results: Sequence[GatedOutcome]) -> list[CommitOutcome]:
    """`commit_gated`'s answers as `commit` gives them (a refusal is `HELD`)."""
    return [CommitOutcome.HELD if isinstance(r, FlowAnswer) else r for r in results]


class FlowStore(Protocol):
    def slot_state(self, tenant: str, key: str) -> SlotState:
        """The holders of workflow concurrency key `key`'s slots in `tenant` and the
        executions waiting for one, each in start order (empty for a key nobody uses)."""
        ...

    def acquire_flow(
        self,
        tenant: str,
        execution_id: str,
        owner: str,
        now: datetime,
        rates: Sequence[RateRequest] = (),
        slots: Sequence[SlotClaim] = (),
    ) -> FlowAnswer:
        """Take every rate-limit unit and activity slot asked, in one transaction, or none
        (then say how long to wait: the longest of the refusals, and why). `owner` holds
        the lease of `execution_id`; its slots count while that lease is its own."""
        ...

    def acquire_flows(self, asks: Sequence[FlowAcquire]) -> list[FlowAnswer]:
        """`acquire_flow` for each of `asks`, in order, in ONE transaction (a worker's
        runners asking at once share it, as their commits do)."""
        ...

    def commit_gated(self, steps: Sequence[StepWrite]) -> list[GatedOutcome]:
        """`commit(steps)` (one transaction, each step checked on its own), taking each
        step's `gate` in that transaction, in order, right before the step: a refused gate
        leaves its step unwritten and answers its `FlowAnswer` (the bucket still remembers
        the waiter's look); a step that does not apply takes nothing."""
        ...

    def activity_slot_holders(self, tenant: str, key: str, now: datetime) -> list[str]:
        """The attempts holding activity concurrency key `key`'s slots now."""
        ...

    def flow_keys(self, tenant: str, now: datetime) -> list[FlowKey]:
        """The tenant's concurrency keys with slots held or waited for, by kind and key:
        workflow keys' holders and waiting executions; activity keys' attempts whose slot
        still counts (their lease holds) and those waiting that still wait."""
        ...

    def set_rate_limit(
        self,
        tenant: str,
        key: str,
        capacity: float,
        per_second: float,
        by: str,
        now: datetime,
        *,
        audit: AuditEntry | None = None,
    ) -> RateLimitRecord:
        """Declare (or change) the tenant's bucket `key`: it holds `capacity` units and
        refills at `per_second`; activities naming it use these numbers. `audit` is
        appended in the same transaction."""
        ...

    def rate_limits(self, tenant: str) -> list[RateLimitRecord]:
        """The tenant's buckets (declared or made by activities), by key."""
        ...

    def delete_rate_limit(self, tenant: str, key: str, *, audit: AuditEntry | None = None) -> bool:
        """Delete the tenant's bucket `key` (False: there was none, and nothing is audited)."""
        ...
