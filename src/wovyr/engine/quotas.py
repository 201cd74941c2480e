"""Tenants' quotas: what is set, what a start or an attempt debits, and changing them.

A tenant's quotas are stored with its row (`TenantRecord.quotas`, set by the host's
administrator with `wovyr admin quotas set`, or lowered by the tenant's own admin over the
API); a tenant without quotas has no limits. The daily budgets are counted in the store's
ledger per UTC day (`quota_usage`), debited in the same transaction as the work they pay
for, so no restart, crash or second server resets or overspends a day:

- `executions_per_day`: every new execution (a start, a schedule fire, a child) debits 1;
  the start that would pass the limit is refused (`QuotaExceeded`, retry after the next
  UTC midnight by the engine's clock). The next run of a continue-as-new chain is a new
  execution too, admitted as a start is (`start_debits`, debited by `Engine.continue_hold`
  in a transaction of its own just before the hand-over commits): a hand-over the quotas
  refuse is not failed but held, a durable timer to the next UTC midnight, and tried
  again when it fires.
- `activity_seconds_per_day`: an attempt's measured seconds are debited by the commit that
  records its result. Work already done is never refused: the attempts in flight finish
  and their seconds count, possibly past the limit; from then on the tenant's new
  executions are refused, and its running executions start no new attempt (a worker
  about to start one holds the execution instead: a durable timer to the next UTC
  midnight, `waiting_on` "quota: activity seconds for tenant T exhausted until ... 00:00
  UTC"; `Engine.quota_hold`), until the next UTC day.
- `model_tokens_per_day` and `model_cost_per_day`: the input + output tokens, and the cost
  (in the providers' prices), of the tenant's model calls. Each `agent` model call debits
  its tokens and cost in the commit that records it (`ModelCallCompleted`), each `llm`
  answer in the commit that records its result (an activity's, a `for_each` item's, a
  `repeat` iteration's, or its failure after answers that never matched its schema).
  Unlike the other budgets these two are counted with or without a quota, so the status
  shows what model calls used from the first one. As with activity seconds, work done is
  never refused: a call in flight counts even past the limit; from then on, until the next
  UTC midnight, the tenant's new executions are refused and its model calls not yet made
  fail (`QuotaExceeded`, not retried) before they reach the provider.
- `stored_bytes_per_day`: the bytes of the values (inputs, outputs, errors: their JSON) the
  tenant's executions record, debited by the start and by the commit of each step that
  records them. A start whose input would pass the limit is refused; a step's values are
  work done and never refused (each execution is bounded by its own byte budget, see
  `wovyr.engine.core.bounds`); once the day's bytes are used up, new executions are
  refused and running ones start no new attempt (held, as for activity seconds) until the
  next UTC day.
- `concurrent_executions`: a start is refused while that many executions of the tenant
  are running (waiting ones count), retry after a few seconds.
- `max_schedule_rate`: the most fires per minute one schedule of the tenant may be set to
  (its interval at least 60 / rate seconds), checked when a schedule is created or changed.
- `weight` and `max_slots`: the tenant's share of a worker's slots under fair share (its
  weight relative to the other tenants with work, default 1) and the most slots of one
  worker its executions may hold at once. Workers read them (`TenantShares`, cached for
  a moment) and apply them; a worker's own `--max-per-tenant` stays a ceiling, its
  `tenant_weights` the default of a tenant with no stored weight.
- `max_running`: the most executions of the tenant leased at once by all workers together
  (every process on the store). The workers' fair claim counts the tenant's live leases in
  the claim's own transaction and takes at most the difference, so no two workers both
  take the last slot; the rest of the tenant's ready work waits, claimable, for a lease to
  end. It is a cap on running work, where `concurrent_executions` refuses starts.
- `max_schedules`: the most schedules the tenant may have at once; creating one more is
  refused (`QuotaExceeded`, budget `max_schedules`), counted in the create's transaction.
  Together with `max_schedule_rate` (and the store's minimum interval) it bounds how many
  fires a tenant's schedules can make.

The ledger is generic (`Debit(budget, amount, day, limit)`): a later budget (model tokens,
cost) is one more name debited by the step that uses it.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from datetime import UTC, date, datetime, timedelta
from typing import Any

from wovyr.errors import InputError, Problem
from wovyr.store.audit import AuditEntry
from wovyr.store.platform import TenantRecord, TenantStore
from wovyr.store.records import Debit

__all__ = [
    "DEFAULT_WEIGHT",
    "EXECUTIONS",
    "MAX_WEIGHT",
    "MODEL_COST",
    "MODEL_TOKENS",
    "QUOTA_NAMES",
    "SECONDS",
    "STORED",
    "QuotaCache",
    "Quotas",
    "check_grant",
    "day_of",
    "midnight_after",
    "model_debits",
    "model_quota_exhausted",
    "parse_quotas",
    "quotas_of",
    "seconds_to_midnight",
    "set_quotas",
    "start_debits",
    "stored_debits",
    "stored_quotas",
]

EXECUTIONS = "executions"  # the ledger's budget names
SECONDS = "activity_seconds"
MODEL_TOKENS = "model_tokens"
MODEL_COST = "model_cost"
STORED = "stored_bytes"

QUOTA_NAMES = (
    "executions_per_day",
    "activity_seconds_per_day",
    "model_tokens_per_day",
    "model_cost_per_day",
    "stored_bytes_per_day",
    "concurrent_executions",
    "max_schedule_rate",
    "weight",
    "max_slots",
    "max_running",
    "max_schedules",
)
DEFAULT_WEIGHT = 1.0  # the fair-share weight of a tenant none is set for
MAX_WEIGHT = 1000.0
_WHOLE = (
    "executions_per_day",
    "concurrent_executions",
    "max_slots",
    "max_running",
    "model_tokens_per_day",
    "max_schedules",
    "stored_bytes_per_day",
)


@dataclass(frozen=True)
class Quotas:
    """A tenant's limits; None: no limit."""

    executions_per_day: int | None = None
    activity_seconds_per_day: float | None = None
    concurrent_executions: int | None = None
    max_schedule_rate: float | None = None  # fires per minute of one schedule
    weight: float | None = None  # fair share of worker slots; None: the default (1)
    max_slots: int | None = None  # slots of one worker the tenant may hold at once
    model_tokens_per_day: int | None = None  # input + output tokens of model calls
    model_cost_per_day: float | None = None  # in the providers' prices
    max_running: int | None = None  # executions leased at once by all workers together
    max_schedules: int | None = None  # schedules the tenant may have at once
    stored_bytes_per_day: int | None = None  # bytes of values the executions record

    @property
    def empty(self) -> bool:
        return all(getattr(self, f.name) is None for f in fields(self))

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def raises(self, new: Quotas) -> list[str]:
        """The quotas that `new` raises or removes compared to these (what only the host's
        administrator may do)."""
        out = []
        for name in QUOTA_NAMES:
            old, value = getattr(self, name), getattr(new, name)
            if name == "weight":  # no weight set is the default weight, not "no limit"
                old = DEFAULT_WEIGHT if old is None else old
                value = DEFAULT_WEIGHT if value is None else value
            if old is not None and (value is None or value > old):
                out.append(name)
        return out


_BOUNDS = {
    "weight": (0.0, MAX_WEIGHT),
    "max_slots": (1.0, math.inf),
    "max_running": (1.0, math.inf),
}
_RANGES = {
    **dict.fromkeys(QUOTA_NAMES, "0 or more"),
    "weight": f"more than 0 and at most {MAX_WEIGHT:g}",
    "max_slots": "1 or more",
    "max_running": "1 or more",
}


def parse_quotas(data: dict[str, Any] | None) -> Quotas:
    """Quotas from their JSON form; `InputError` naming each bad key."""
    if not data:
        return Quotas()
    problems = [Problem(f"unknown quota {k!r}", path=k) for k in data if k not in QUOTA_NAMES]
    values: dict[str, Any] = {}
    for name in QUOTA_NAMES:
        value = data.get(name)
        if value is None:
            continue
        whole = name in _WHOLE
        low, high = _BOUNDS.get(name, (0.0, math.inf))
        ok = (
            isinstance(value, int | float)
            and not isinstance(value, bool)
            and math.isfinite(value)
            and (value > low if name == "weight" else value >= low)
            and value <= high
            and (not whole or float(value).is_integer())
        )
        if not ok:
            kind = "a whole number" if whole else "a number"
            problems.append(Problem(f"{name} must be {kind}, {_RANGES[name]}", path=name))
            continue
        values[name] = int(value) if whole else float(value)
    if problems:
        raise InputError(problems)
    return Quotas(**values)


def quotas_of(store: TenantStore, tenant: str) -> Quotas:
    """`tenant`'s quotas now (one read of its row); stored quotas that no longer parse
    (written by hand into the store) fail closed: every limit 0, one slot at most."""
    record = store.get_tenant(tenant)
    return stored_quotas(record.quotas if record is not None else None)


def stored_quotas(data: dict[str, Any] | None) -> Quotas:
    """The quotas a tenant row holds (see `quotas_of`)."""
    if not data:
        return Quotas()
    try:
        return parse_quotas(data)
    except InputError:
        return Quotas(
            0,
            0.0,
            0,
            0.0,
            max_slots=1,
            model_tokens_per_day=0,
            model_cost_per_day=0.0,
            max_running=1,
            max_schedules=0,
            stored_bytes_per_day=0,
        )


def set_quotas(
    store: TenantStore,
    tenant: str,
    quotas: Quotas,
    *,
    by: str,
    at: datetime,
    audit: AuditEntry | None = None,
) -> Quotas:
    """Store `quotas` for `tenant` (its policy kept; `audit` appended in the same
    transaction); return them as stored."""
    current = store.get_tenant(tenant)
    stored = None if quotas.empty else quotas.to_dict()
    if current is None:
        record = TenantRecord(tenant, None, at, by, quotas=stored)
    else:
        record = replace(current, quotas=stored, updated_at=at, updated_by=by)
    store.put_tenant(record, audit=audit)
    return quotas_of(store, tenant)


def day_of(now: datetime) -> date:
    """The UTC day `now` falls in: the ledger's day."""
    return now.astimezone(UTC).date()


def midnight_after(now: datetime) -> datetime:
    """The next UTC midnight after `now`: when the ledger's next day begins."""
    utc = now.astimezone(UTC)
    return datetime.combine(utc.date() + timedelta(days=1), datetime.min.time(), UTC)


def seconds_to_midnight(now: datetime) -> float:
    """Seconds from `now` to the next UTC midnight (at least 1)."""
    midnight = midnight_after(now)
    return max(1.0, math.ceil((midnight - now.astimezone(UTC)).total_seconds()))


def start_debits(
    quotas: Quotas, now: datetime, stored: Callable[[], int] = lambda: 0
) -> tuple[Debit, ...]:
    """What a new execution debits under `quotas`: one execution, the bytes of its input
    (`stored`, asked only when the tenant has that quota), and checks (amounts of 0) that
    the day's activity seconds, model tokens and model cost are not used up."""
    gates = (
        (SECONDS, quotas.activity_seconds_per_day),
        (MODEL_TOKENS, quotas.model_tokens_per_day),
        (MODEL_COST, quotas.model_cost_per_day),
    )
    if (
        quotas.executions_per_day is None
        and quotas.stored_bytes_per_day is None
        and all(limit is None for _, limit in gates)
    ):
        return ()
    day, wait = day_of(now), seconds_to_midnight(now)
    out = []
    if quotas.executions_per_day is not None:
        out.append(Debit(EXECUTIONS, 1, day, quotas.executions_per_day, wait))
    if quotas.stored_bytes_per_day is not None:
        out.append(Debit(STORED, stored(), day, quotas.stored_bytes_per_day, wait))
    out.extend(Debit(name, 0, day, limit, wait) for name, limit in gates if limit is not None)
    return tuple(out)


def stored_debits(quotas: Quotas, stored: int, now: datetime) -> tuple[Debit, ...]:
    """What a step that recorded `stored` bytes of values debits (work done: no limit),
    when the tenant has that quota (else nothing is written)."""
    if quotas.stored_bytes_per_day is None or stored <= 0:
        return ()
    return (Debit(STORED, stored, day_of(now)),)


def model_debits(tokens: int, cost: float | None, now: datetime) -> tuple[Debit, ...]:
    """What model calls that used `tokens` and `cost` debit when they are recorded (work
    done: no limit). Counted whether or not the tenant has a model quota, so its status
    shows what its model calls used today from the first call (a row per tenant and day,
    written only by the steps that record model calls)."""
    day = day_of(now)
    out = []
    if tokens > 0:
        out.append(Debit(MODEL_TOKENS, tokens, day))
    if cost:
        out.append(Debit(MODEL_COST, cost, day))
    return tuple(out)


def model_quota_exhausted(quotas: Quotas, used: dict[str, float], tenant: str) -> str | None:
    """Why the tenant may make no model call today (its ledger row `used` at or past a
    model quota), or None."""
    for name, limit, what in (
        (MODEL_TOKENS, quotas.model_tokens_per_day, "model tokens"),
        (MODEL_COST, quotas.model_cost_per_day, "model cost"),
    ):
        if limit is not None and used.get(name, 0.0) >= limit:
            return (
                f"quota: {what} for tenant {tenant} used up today ({used.get(name, 0.0):g} "
                f"of {limit:g}); the next UTC day starts at 00:00 UTC"
            )
    return None


def check_grant(grant: dict[str, Any] | None) -> dict[str, Any] | None:
    """A budget grant (`{tokens: int >= 1, cost: number > 0}`, either or both), or
    `InputError` naming each bad key; None for none."""
    if not grant:
        return None
    if not isinstance(grant, dict):
        raise InputError([Problem("a grant is an object {tokens, cost}", path="grant")])
    problems = [
        Problem(f"unknown grant key {k!r}", path=f"grant.{k}", hint="tokens, cost")
        for k in grant
        if k not in ("tokens", "cost")
    ]
    out: dict[str, Any] = {}
    tokens, cost = grant.get("tokens"), grant.get("cost")
    if tokens is not None:
        if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 1:
            problems.append(Problem("grant.tokens must be a whole number >= 1", "grant.tokens"))
        else:
            out["tokens"] = tokens
    if cost is not None:
        ok = isinstance(cost, int | float) and not isinstance(cost, bool)
        if not ok or not math.isfinite(cost) or cost <= 0:
            problems.append(Problem("grant.cost must be a number > 0", path="grant.cost"))
        else:
            out["cost"] = float(cost)
    if problems:
        raise InputError(problems)
    return out or None


class QuotaCache:
    """Tenants' quotas read at most once per `ttl` seconds per process: a start of a tenant
    without quotas costs no extra read. A change made through this process is seen at once
    (`forget`); one made elsewhere within `ttl`."""

    def __init__(self, ttl: float = 2.0) -> None:
        self.ttl = ttl
        self._lock = threading.Lock()
        self._known: dict[str, tuple[float, Quotas]] = {}

    def get(self, store: TenantStore, tenant: str) -> Quotas:
        now = time.monotonic()
        with self._lock:
            hit = self._known.get(tenant)
        if hit is not None and now - hit[0] < self.ttl:
            return hit[1]
        quotas = quotas_of(store, tenant)
        with self._lock:
            self._known[tenant] = (now, quotas)
        return quotas

    def forget(self, tenant: str) -> None:
        with self._lock:
            self._known.pop(tenant, None)
