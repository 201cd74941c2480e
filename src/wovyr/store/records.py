"""The frozen records the stores exchange with the engine (rows, steps, claims, pages).

A store knows rows, not workflow semantics: the engine hands it a `StepWrite` (events +
checkpoint + queue/timer changes) and the store writes it in one transaction, refusing it
when the expected sequence number or the lease fence no longer holds.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field
from datetime import UTC, date, datetime
from typing import Any

from wovyr.events import Event
from wovyr.ids import DEFAULT_TENANT
from wovyr.statuses import ExecutionStatus
from wovyr.store.audit import AuditEntry
from wovyr.store.frozen import record

__all__ = [
    "DEFAULT_TENANT",
    "FINISHED",
    "MAX_PRIORITY",
    "MAX_TURN_TENANTS",
    "PRIORITY_AGING_SECONDS",
    "CheckpointChanges",
    "Claim",
    "ClaimAsk",
    "CommitOutcome",
    "Debit",
    "DefinitionRecord",
    "EventRecord",
    "ExecutionFilter",
    "ExecutionKey",
    "ExecutionRecord",
    "FairShare",
    "FlowAcquire",
    "LeaseState",
    "NewExecution",
    "Page",
    "RateRequest",
    "SlotClaim",
    "SlotRelease",
    "SlotRequest",
    "SlotState",
    "StepWrite",
    "TimerRecord",
    "claim_rank",
]

FINISHED: tuple[str, ...] = tuple(sorted(ExecutionStatus.TERMINAL))
"""The statuses of executions that will not change again (what retention may purge, and
whose slot waiters are gone): `ExecutionStatus.TERMINAL`, in a fixed order."""
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MAX_TURN_TENANTS = 256  # tenants one claim's `FairShare.turns` may name (one probe each)
MAX_PRIORITY = 9  # priorities are 0 (the default) to 9
# Aging: one level of priority is worth this much waiting. Within a tenant the claim takes
# the lowest `claim_rank` (start time less priority x this), so a priority-p start overtakes
# lower priorities started up to (p - q) x this before it, and a start of priority q is
# overtaken only by work started less than (9 - q) x this after it: its wait is bounded.
PRIORITY_AGING_SECONDS = 60


def claim_rank(created_at: datetime, priority: int) -> int:
    """Where an execution started at `created_at` with `priority` stands in its tenant's
    claim order (lower first): microseconds since 1970 less the aging of its priority."""
    delta = created_at - _EPOCH
    micros = (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    return micros - priority * PRIORITY_AGING_SECONDS * 1_000_000


@record
class DefinitionRecord:
    hash: str
    name: str
    version: str
    source: str
    created_at: datetime
    tenant: str = DEFAULT_TENANT


@record
class ExecutionRecord:
    """One execution's row. `checkpoint` is the folded state (None in list results)."""

    id: str
    tenant: str
    workflow: str
    version: str
    definition_hash: str
    status: str
    created_at: datetime
    updated_at: datetime
    seq: int
    parent_id: str | None = None
    waiting_on: str | None = None
    input: Any = None
    output: Any = None
    error: Any = None
    ready: bool = False
    lease_owner: str | None = None
    lease_until: datetime | None = None
    fence: int = 0
    checkpoint: dict[str, Any] | None = None
    labels: Mapping[str, str] = field(default_factory=dict)  # set at start, for search

    @property
    def key(self) -> tuple[str, str]:
        """(tenant, id): what names the execution (ids are per tenant)."""
        return (self.tenant, self.id)

    @property
    def shown_status(self) -> str:
        """The status to show: `waiting` for a running execution that waits (the engine
        sets `waiting_on` exactly then), else `status`."""
        return "waiting" if self.status == "running" and self.waiting_on else self.status


@record
class EventRecord:
    execution_id: str
    seq: int
    type: str
    at: datetime
    data: dict[str, Any]


ExecutionKey = tuple[str, str]
"""(tenant, execution id): an execution's name in a store."""


@record
class TimerRecord:
    execution_id: str
    timer_id: str
    fire_at: datetime
    tenant: str = DEFAULT_TENANT


@record
class Debit:
    """An amount of one of a tenant's daily budgets (`executions`, `activity_seconds`, later
    model tokens and cost) that a write uses, added to the ledger row (tenant, budget, UTC
    `day`) in the write's own transaction.

    With a `limit`, a new execution's debit refuses the whole write (`QuotaExceeded`, with
    `retry_after`) when the row would pass it (`used + amount > limit`, or `used >= limit`
    for an amount of 0: a gate that only checks): the check and the addition are one
    statement, so two writers never both take the last unit. A step's debits pay for work
    already done and are always added; their budget is enforced at the next start.
    """

    budget: str
    amount: float
    day: date
    limit: float | None = None
    retry_after: float = 1.0  # what a refusal tells the caller: seconds until the next day

    def allows(self, used: float) -> bool:
        """Whether a ledger row at `used` takes this debit."""
        if self.limit is None:
            return True
        return used + self.amount <= self.limit and used < self.limit


@record
class SlotRequest:
    """A new execution's claim on a concurrency key (per tenant): it holds one of `limit`
    slots of `key` from its start to its end. Taken in the creating transaction when one is
    free and nobody waits for one; else the execution waits (not ready, `waiting_on`
    "concurrency <key>") until a slot is handed to it, in start order."""

    key: str
    limit: int


@record
class SlotRelease:
    """The step that ends an execution gives back its slot of `key` (or leaves the queue),
    and hands the freed slots to the executions waiting for them, in start order, while
    fewer than `limit` are held: they become ready in the same transaction."""

    key: str
    limit: int


@record
class SlotState:
    """Who holds the slots of a concurrency key and who waits for one, in start order."""

    key: str
    holders: list[str]
    waiting: list[str]


@record
class CheckpointChanges:
    """What a step changes of the checkpoint stored at its expected seq: the top-level keys
    it sets (`activities` aside) and drops, and the activities it sets (any new ones come
    after the others, in the checkpoint's order). Folding them over that checkpoint
    (`wovyr.store.checkpoints.merged`) gives the step's whole checkpoint."""

    set: Mapping[str, Any]
    drop: Sequence[str]
    activities: Mapping[str, Any]

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"set": self.set}
        if self.drop:
            out["drop"] = list(self.drop)
        if self.activities:
            out["activities"] = self.activities
        return out


@record
class StepWrite:
    """Everything one step of one execution changes, written in one transaction.

    The write applies only if the execution's `seq` still equals `expected_seq` and, when
    `fence` is given, the lease fence still equals it (the writer still owns the lease).
    An execution is named by (`tenant`, `execution_id`): the same id in two tenants is two
    executions.
    """

    execution_id: str
    expected_seq: int
    events: Sequence[Event]
    checkpoint: dict[str, Any]
    status: str
    updated_at: datetime
    fence: int | None = None
    ready: bool = False
    release_lease: bool = False
    waiting_on: str | None = None
    output: Any = None
    error: Any = None
    timers_armed: Sequence[tuple[str, datetime]] = ()
    timers_removed: Sequence[str] = ()
    tenant: str = DEFAULT_TENANT
    debits: Sequence[Debit] = ()  # the tenant's budgets this step used (always added)
    audit: AuditEntry | None = None  # appended to the audit chain when (and only if) it applies
    # Continue-as-new: the chain's next run, created in the same transaction when the step
    # applies (never when it is refused). Its id must be new to the tenant: a store that
    # finds it taken refuses the whole transaction (StoreError), so a chain never forks.
    continued_as: NewExecution | None = None
    slot_released: SlotRelease | None = None  # the step ends an execution holding a slot
    # activity concurrency slots (key, holder) whose attempts' results this step records
    flow_released: Sequence[tuple[str, str]] = ()
    # The rate-limit units and activity slots the attempts this step starts need, taken in
    # the step's transaction before it is written: all granted and the step applies, or
    # the step is refused whole (`CommitOutcome.HELD`; nothing of it is written) and the
    # gate's refusal says how long to wait (`FlowStore.commit_gated`). A step that does not
    # apply (conflict, lost lease) takes nothing.
    gate: FlowAcquire | None = None
    # What `checkpoint` changes of the stored one: a store may write these in its place
    # (`wovyr.store.checkpoints`). None: write it whole. Set only for a plain checkpoint.
    changes: CheckpointChanges | None = None

    @property
    def key(self) -> tuple[str, str]:
        """(tenant, execution id): what names the execution."""
        return (self.tenant, self.execution_id)


@record
class NewExecution:
    """An execution to create together with its first step (ExecutionStarted, ...)."""

    id: str
    tenant: str
    workflow: str
    version: str
    definition_hash: str
    created_at: datetime
    input: Any
    first_step: StepWrite
    parent_id: str | None = None
    rerun_of: str | None = None  # the execution this one reruns (a rerun only)
    labels: Mapping[str, str] = field(default_factory=dict)  # written only when there are any
    lease_owner: str | None = None
    lease_until: datetime | None = None
    # Quotas, checked and debited in the creating transaction, only when it creates: the
    # ledger debits, and the most executions of the tenant that may be running (this one
    # not counted yet); over either, the store raises `QuotaExceeded` and writes nothing.
    debits: Sequence[Debit] = ()
    max_running: int | None = None
    audit: AuditEntry | None = None  # appended to the audit chain when (and only if) created
    priority: int = 0  # 0-9: within its tenant, the claim takes higher first (`claim_rank`)
    slot: SlotRequest | None = None  # a workflow's concurrency key

    @property
    def claim_rank(self) -> int:
        return claim_rank(self.created_at, self.priority)


class CommitOutcome(enum.Enum):
    OK = "ok"
    CONFLICT = "conflict"  # the sequence moved on (a signal, a cancel): reload and retry
    LEASE_LOST = "lease_lost"  # another worker owns the execution now: commit nothing
    NOT_FOUND = "not_found"
    HELD = "held"  # the step's flow gate was refused: nothing of it was written


@record
class Claim:
    execution_id: str
    fence: int
    seq: int
    checkpoint: dict[str, Any]
    definition_hash: str
    tenant: str

    @property
    def key(self) -> tuple[str, str]:
        return (self.tenant, self.execution_id)


@record
class FairShare:
    """How a fair claim (`ClaimAsk(..., fair=FairShare(...))`) shares slots between tenants.

    `held`: the slots each tenant holds now (in the claiming worker); `weights`: a tenant's
    share relative to the others (default 1.0); `cap`: the most slots one tenant may hold,
    held + claimed (None: no cap). A tenant's k-th claimable execution (in the plain claim
    order) scores `(held + k) / weight`; the claim takes the lowest scores, ties in the plain
    order. So one claim round serves every tenant with ready work before any tenant's next
    one, and a freed slot goes to the tenant holding the fewest (weighted): one tenant's
    backlog delays another's execution by a slot's turn, not by the backlog.

    `turns`: the claim's share decided by the caller (a worker's `FairClaimer`, which keeps
    the tenants with claimable work and serves them in turn): up to `turns[t]` claimable
    executions of each tenant t (in the plain order within it) and none of any other, one
    indexed probe per tenant and no look for tenants; `held`, `weights` and `cap` are then
    not read. None: the store finds the tenants with claimable work and their rooms itself.

    `max_running` (with `turns` only): the most executions of a tenant leased at once by
    every worker of the store together (its stored quota). In the claim's own transaction
    the store counts that tenant's live leases (lease_until not passed) and leases at most
    the difference, serialised with every other claim of that tenant (SQLite: the one
    writer; PostgreSQL: a lock per tenant), so no two claims both take its last slot.
    """

    held: Mapping[str, int] = field(default_factory=dict)
    weights: Mapping[str, float] = field(default_factory=dict)
    cap: int | None = None
    turns: Mapping[str, int] | None = None
    max_running: Mapping[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.turns is not None and len(self.turns) > MAX_TURN_TENANTS:
            raise ValueError(f"a claim's turns name at most {MAX_TURN_TENANTS} tenants")
        if self.max_running and self.turns is None:
            raise ValueError("max_running is applied by a claim by turns only")

    def rooms(self, waiting: Iterable[str], limit: int) -> dict[str, int]:
        """How many claimable executions of each tenant in `waiting` (those with any) one
        claim of `limit` considers: its share up to the water level S = (limit + the slots
        they hold) / (their weights), i.e. ceil(S * weight) - held, within the limit and the
        cap. The rooms add up to at least `limit` (a tenant above the level gets none), so
        a claim reads about `limit` rows, plus one per waiting tenant at most, however long
        the backlogs; it leases fewer than `limit` only when a tenant has fewer claimable
        executions than its room (the next claim takes more of the others)."""
        tenants = list(waiting)
        if not tenants:
            return {}
        held = sum(self.held.get(t, 0) for t in tenants)
        level = (limit + held) / sum(self._weight(t) for t in tenants)
        rooms = {}
        for t in tenants:
            held = self.held.get(t, 0)
            room = min(limit, math.ceil(level * self._weight(t)) - held)
            if self.cap is not None:
                room = min(room, self.cap - held)
            rooms[t] = max(0, room)
        return rooms

    def _weight(self, tenant: str) -> float:
        return float(self.weights.get(tenant, 1.0))

    def score(self, tenant: str, rank: int) -> float:
        """The score of `tenant`'s `rank`-th (from 1) claimable execution; lowest first."""
        return (self.held.get(tenant, 0) + rank) / self._weight(tenant)


@record
class ClaimAsk:
    """One claim (`WorkQueue.claim`): lease up to `limit` ready executions (of every tenant)
    to `owner` for `lease_seconds`, their lease free or expired at `now`.

    `only` restricts the claim to those ids of `tenant`; `partitions` of `of` to executions
    with `stable_shard(id) % of` in `partitions` (see `wovyr.store.shards`). Without `fair`
    the oldest ready come first (plain order); with it, tenants share the claim as
    `FairShare` says (weighted turns, a cap per tenant), still one statement. `fair` is
    ignored with `only` (one tenant).
    """

    owner: str
    now: datetime
    lease_seconds: float
    limit: int
    only: Sequence[str] | None = None
    _: KW_ONLY
    tenant: str = DEFAULT_TENANT
    partitions: Sequence[int] | None = None
    of: int | None = None
    fair: FairShare | None = None


@record
class ExecutionFilter:
    """Which executions a list returns. `status` is the stored status; `waiting` True keeps
    only rows with a `waiting_on` text, False only rows without (so `status="running"` with
    `waiting=True` lists the waiting executions, with False the busy ones; see
    `ExecutionRecord.shown_status`)."""

    tenant: str | None = DEFAULT_TENANT
    workflow: str | None = None
    status: str | None = None
    waiting: bool | None = None
    created_after: datetime | None = None
    created_before: datetime | None = None
    parent_id: str | None = None
    rerun_of: str | None = None  # the reruns of that execution
    # Search: executions with every one of these labels; whose id starts with `id_prefix`
    labels: Sequence[tuple[str, str]] = ()
    id_prefix: str | None = None
    # executions of any of these workflows (a name search's matches); each walks its index
    workflows: Sequence[str] | None = None
    limit: int = 50
    cursor: tuple[datetime, str] | None = None  # (created_at, id) of the last row seen


@record
class Page:
    items: list[ExecutionRecord]
    next_cursor: tuple[datetime, str] | None = None


@dataclass
class LeaseState:
    """What a heartbeat learned about one owned execution."""

    fence: int
    seq: int
    extra: dict[str, Any] = field(default_factory=dict)


# --- flow-control asks (`wovyr.store.flow` decides them) ----------------------------------


@record
class RateRequest:
    """`units` from bucket `key`; `capacity` and `per_second` as the activity declares them
    (None: the bucket must have been declared by an admin)."""

    key: str
    units: float = 1.0
    capacity: float | None = None
    per_second: float | None = None


@record
class SlotClaim:
    """A slot of activity concurrency key `key` (at most `limit` held) for `holder` (the
    attempt's idempotency key)."""

    key: str
    holder: str
    limit: int


@record
class FlowAcquire:
    """What one `acquire_flow` asks (`acquire_flows`: many in one transaction).

    `parts`: the attempts the ask is for, in order, as how many of `rates` and of `slots`
    each takes (they follow each other in those lists); empty: one attempt asks them all.
    Each attempt is weighed on its own: a refusal says how many leading attempts would have
    been granted (`FlowAnswer.fits`), so a step starting more attempts than a bucket or a
    key holds at once starts those and holds the others."""

    tenant: str
    execution_id: str
    owner: str
    now: datetime
    rates: Sequence[RateRequest] = ()
    slots: Sequence[SlotClaim] = ()
    parts: Sequence[tuple[int, int]] = ()
