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
from dataclasses import replace
from datetime import datetime
from typing import Protocol

from wovyr.store.audit import AuditEntry
from wovyr.store.frozen import record
from wovyr.store.records import (
    CommitOutcome,
    FlowAcquire,
    RateRequest,
    SlotClaim,
    SlotState,
    StepWrite,
)

__all__ = [
    "GRANTED",
    "HOLD_TIMER_PREFIX",
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
    "NewRateLimit",
    "RateLimitRecord",
    "RateRequest",
    "SlotClaim",
    "plain_outcomes",
    "rate_refused",
    "slot_blocked",
    "slot_refused",
    "tight_keys",
]

#: The durable timer holding an execution's attempts that a gate refused is `flow:<seq>`.
#: A step that frees activity slots moves the holds of its keys' oldest waiters (one per
#: slot freed) to its own time, so they look again at once instead of at their recheck.
HOLD_TIMER_PREFIX = "flow:"
SLOT_RECHECK_SECONDS = 0.5  # how soon an attempt refused an activity slot looks again
NEVER = 3600.0  # the wait of a request no bucket can ever grant (it looks again hourly)
# An attempt waiting for an activity slot keeps its place in the key's queue while it comes
# back (every SLOT_RECHECK_SECONDS) within this long and its execution has not ended; one
# that did not (held longer by a rate limit, its execution cancelled, workers too busy to
# fire its timer) loses its place, so a vanished waiter keeps no slot from the others.
WAITER_TTL_SECONDS = 5.0


@record
class FlowAnswer:
    """Granted, or how long to wait (seconds) and why ("rate limit openai: next slot in
    3.2 s", "concurrency k: 2 running (a, b)"). A refusal of an ask for several attempts
    says how many of its leading attempts fit now (`fits`: granted, had they been asked
    alone), and waits for the first that does not."""

    granted: bool
    wait: float = 0.0
    reason: str = ""
    fits: int = 0


@record
class FlowKey:
    """A concurrency key a tenant uses now: `kind` `workflow` (executions holding a slot or
    waiting for one) or `activity` (attempts running with a slot, and those waiting)."""

    kind: str
    key: str
    running: int
    waiting: int


@record
class NewRateLimit:
    """`tenant`'s bucket `key` as declared (or changed) by `by` at `now`: it holds
    `capacity` units and refills at `per_second`."""

    tenant: str
    key: str
    capacity: float
    per_second: float
    by: str
    now: datetime


@record
class RateLimitRecord:
    """A tenant's token bucket: `capacity` units (the burst), refilled at `per_second`;
    `declared` by an admin, or made by the first activity that named it."""

    tenant: str
    key: str
    capacity: float
    per_second: float
    tokens: float  # as of `refilled_at`
    declared: bool
    updated_by: str = ""
    refilled_at: float = 0.0  # seconds since 1970

    def tokens_at(self, now: datetime) -> float:
        """The units the bucket holds at `now`: refilled since its last use at its rate, up
        to its capacity (a page shows the bucket as a caller would find it)."""
        gained = max(0.0, now.timestamp() - self.refilled_at) * self.per_second
        return min(self.capacity, self.tokens + gained)


@record
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
        """The bucket as of `now`: refilled at its rate, up to its capacity (itself when
        that changes nothing: the gates of one transaction share their `now`)."""
        if now <= self.refilled_at and self.tokens <= self.capacity:
            return self
        gained = max(0.0, now - self.refilled_at) * self.per_second
        return self.holding(min(self.capacity, self.tokens + gained), max(now, self.refilled_at))

    def shaped(self, capacity: float, per_second: float) -> Bucket:
        """This bucket as an activity that names it declares it (`capacity`, `per_second`):
        an admin's declared bucket keeps its own numbers."""
        if self.declared or (capacity == self.capacity and per_second == self.per_second):
            return self
        return Bucket(capacity, per_second, self.tokens, self.refilled_at, self.wake_at)

    def holding(self, tokens: float, refilled_at: float | None = None) -> Bucket:
        """This bucket with `tokens` (as of `refilled_at`, default its own): built directly,
        as `dataclasses.replace` costs several times more on the gates' hot path."""
        at = self.refilled_at if refilled_at is None else refilled_at
        return Bucket(self.capacity, self.per_second, tokens, at, self.wake_at, self.declared)

    def wait_for(self, units: float, now: float, spent: float = 0.0) -> tuple[Bucket, float]:
        """For a refilled bucket short of `units` (once `spent` units are taken first, by
        the attempts before it in the same ask): when the request should look again (its
        deficit at the refill rate, and after the last waiter told before it, so that
        waiters look one at a time instead of all at once), and the bucket that remembers
        it. A request above the capacity waits `NEVER`."""
        if units > self.capacity:
            return self, NEVER
        step = units / self.per_second
        deficit = units + spent - self.tokens
        wake = max(now + deficit / self.per_second, self.wake_at + step)
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
    claim: SlotClaim, held: list[str], queue: list[str], before: Sequence[str] = ()
) -> str | None:
    """Why `claim` cannot have a slot now (None: it can): its key's slots are `held`, or the
    free ones are kept for the attempts that began to wait before it (`queue`, oldest
    first; a slot that frees goes to the oldest). `before`: the holders the same ask claims
    for its earlier attempts (counted as held, and no longer as waiting)."""
    if claim.holder in held:
        return None
    if before:
        held = [*held, *(h for h in before if h not in held)]
        queue = [h for h in queue if h not in before]
    ahead = queue.index(claim.holder) if claim.holder in queue else len(queue)
    if len(held) + ahead < claim.limit:
        return None
    return slot_refused(claim.key, claim.limit, held, ahead)


#: The answer of every granted gate (answers are immutable).
GRANTED = FlowAnswer(granted=True)


def _groups(
    ask: FlowAcquire,
) -> Sequence[tuple[Sequence[RateRequest], Sequence[SlotClaim]]]:
    """The rates and slots of each attempt of `ask`, in order (one group: all of them)."""
    if len(ask.parts) <= 1:
        return ((ask.rates, ask.slots),)
    groups = []
    r = c = 0
    for rates, slots in ask.parts:
        groups.append((ask.rates[r : r + rates], ask.slots[c : c + slots]))
        r, c = r + rates, c + slots
    return groups


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
        # id(ask) -> the ask granted and the units it took by (tenant, bucket key)
        self._granted: dict[int, tuple[FlowAcquire, dict[tuple[str, str], float]]] = {}
        # (tenant, key, holder) -> execution id: refused a slot, in the queue (until TTL)
        self._queued: dict[tuple[str, str, str], str] = {}
        # (tenant, key, holder): refused for another reason with its slot free (no wake left)
        self._looked: set[tuple[str, str, str]] = set()

    def decide(self, ask: FlowAcquire) -> FlowAnswer:
        """Grant `ask` every rate-limit unit and activity slot it asks, or nothing (then how
        long to wait: the longest of its refusals, and why). The buckets are refilled to
        `at`; a bucket not declared by an admin takes the shape its request declares (made
        full by the first); a refusal takes nothing but remembers the waiter's look; a
        claim refused its slot joins (or keeps its place in) its key's queue. An ask for
        several attempts (`parts`) weighs them one after the other, each after the units
        and slots of those before it: the first that does not fit refuses the ask, which
        then says how many fit (`fits`) and waits for that one. One call per gated step, on
        the worker's hot path: no allocation beyond the rows that change."""
        t, now = ask.tenant, self.at
        buckets = self._buckets
        refusals: list[tuple[float, str]] | None = None
        states: dict[tuple[str, str], Bucket] = {}
        need: dict[tuple[str, str], float] = {}  # the units of the attempts that fit
        claimed: dict[tuple[str, str], list[str]] = {}  # their slots (asks of several)
        groups = _groups(ask)
        fits = 0
        for rates, slots in groups:
            part: dict[tuple[str, str], float] = {}
            for request in rates:
                key = (t, request.key)
                bucket = states.get(key) or buckets.get(key)
                if request.capacity is not None and request.per_second is not None:
                    # made (or reshaped) by the activity that names it
                    bucket = (
                        Bucket(request.capacity, request.per_second, request.capacity, now)
                        if bucket is None
                        else bucket.shaped(request.capacity, request.per_second)
                    )
                if bucket is None:
                    refusals = refusals or []
                    refusals.append((NEVER, f"rate limit {request.key}: no such bucket"))
                    continue
                states[key] = bucket.refill(now)
                part[key] = part.get(key, 0.0) + request.units
            for key, units in part.items():
                bucket, spent = states[key], need.get(key, 0.0)
                if bucket.tokens - spent < units:
                    states[key], wait = bucket.wait_for(units, now, spent)
                    refusals = refusals or []
                    refusals.append((wait, rate_refused(key[1], wait)))
            for claim in slots:
                key = (t, claim.key)
                held = self._holders.setdefault(key, [])
                before = claimed.get(key, ())
                blocked = slot_blocked(claim, held, self._waiters.get(key, []), before)
                if blocked is not None:
                    refusals = refusals or []
                    refusals.append((SLOT_RECHECK_SECONDS, blocked))
            if refusals is not None:
                break
            fits += 1
            for key, units in part.items():
                need[key] = need.get(key, 0.0) + units
            if len(groups) > 1:
                for claim in slots:
                    claimed.setdefault((t, claim.key), []).append(claim.holder)
        if refusals is None:
            for key, units in need.items():
                bucket = states[key]
                states[key] = bucket.holding(bucket.tokens - units)
        for key, bucket in states.items():
            if buckets.get(key) is not bucket:
                buckets[key] = bucket
                self._changed.add(key)
        if refusals is None:
            for claim in ask.slots:
                key = (t, claim.key)
                held = self._holders[key]
                if claim.holder not in held:
                    held.append(claim.holder)
                queue = self._waiters.get(key)
                if queue and claim.holder in queue:
                    queue.remove(claim.holder)
                if self._queued:
                    self._queued.pop((t, claim.key, claim.holder), None)
            self._granted[id(ask)] = (ask, need)
            return GRANTED
        self._wait_in_line(ask, groups, fits)
        wait, reason = max(refusals)
        return FlowAnswer(granted=False, wait=wait, reason=reason, fits=fits)

    def _wait_in_line(
        self,
        ask: FlowAcquire,
        groups: Sequence[tuple[Sequence[RateRequest], Sequence[SlotClaim]]],
        fits: int,
    ) -> None:
        """The claims of a refused ask: one refused its slot joins (or stays in) its key's
        queue, behind the claims of the ask's attempts before it; so does one of the
        attempts that fit (`fits`: asked again at once, alone, they keep their turn before
        the others); one whose slot was free was refused for another reason (it looked,
        see `looked`)."""
        t = ask.tenant
        before: dict[tuple[str, str], list[str]] = {}
        for n, (_, slots) in enumerate(groups):
            for claim in slots:
                key = (t, claim.key)
                queue = self._waiters.setdefault(key, [])
                held = self._holders.setdefault(key, [])
                earlier = before.get(key, ())
                if n < fits or slot_blocked(claim, held, queue, earlier) is not None:
                    if claim.holder not in queue and claim.holder not in held:
                        queue.append(claim.holder)
                    self._queued[(t, claim.key, claim.holder)] = ask.execution_id
                elif self.queues is None or key in self.queues:
                    self._looked.add((t, claim.key, claim.holder))
                if fits:
                    before.setdefault(key, []).append(claim.holder)

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
            b = self._buckets[key]
            self._buckets[key] = b.holding(min(b.capacity, b.tokens + units))
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

    def looked(self) -> list[tuple[str, str, str]]:
        """The waiters (tenant, key, holder) that looked again and were refused for another
        reason (a rate limit) while their slot was free: a wake that brought them is spent
        (their next hold waits its own time), as a refusal that queues them spends it."""
        return sorted(self._looked)

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

    def acquire_flow(self, ask: FlowAcquire) -> FlowAnswer:
        """Take every rate-limit unit and activity slot `ask` asks, in one transaction, or
        none (then say how long to wait: the longest of the refusals, and why). `ask.owner`
        holds the lease of `ask.execution_id`; its slots count while that lease is its own."""
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
        self, limit: NewRateLimit, *, audit: AuditEntry | None = None
    ) -> RateLimitRecord:
        """Declare (or change) the tenant's bucket as `limit` says; activities naming it use
        these numbers. `audit` is appended in the same transaction."""
        ...

    def rate_limits(self, tenant: str) -> list[RateLimitRecord]:
        """The tenant's buckets (declared or made by activities), by key."""
        ...

    def delete_rate_limit(self, tenant: str, key: str, *, audit: AuditEntry | None = None) -> bool:
        """Delete the tenant's bucket `key` (False: there was none, and nothing is audited)."""
        ...
