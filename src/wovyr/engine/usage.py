"""A tenant's quotas over a runtime: reading and changing them, what it used today, what
a step debits, and the holds that keep an execution from spending what is used up (see
`wovyr.engine.quotas` for the budgets and the ledger)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from wovyr.engine import quotas as ledger
from wovyr.engine.core.shown import CONTINUE_HOLD, QUOTA_HOLD
from wovyr.engine.core.state import ExecutionState
from wovyr.engine.quotas import (
    EXECUTIONS,
    MODEL_COST,
    MODEL_TOKENS,
    SECONDS,
    STORED,
    Quotas,
    day_of,
    midnight_after,
    quotas_of,
    start_debits,
)
from wovyr.engine.runtime import Runtime
from wovyr.events import Event, TimerArmed
from wovyr.statuses import ExecutionStatus
from wovyr.store.audit import payload_digest
from wovyr.store.base import ExecutionFilter
from wovyr.store.records import Debit

__all__ = [
    "attempt_debits",
    "continue_hold",
    "continue_timer",
    "model_debits",
    "model_quota_exhausted",
    "quota_hold",
    "quota_usage",
    "set_quotas",
    "started_today",
    "stored_debits",
    "tenant_quotas",
]


def continue_timer(state: ExecutionState, fire_at: datetime, reason: str) -> TimerArmed:
    """The durable timer holding the hand-over of `state`'s run (`continue_hold`)."""
    return TimerArmed(
        timer=f"{CONTINUE_HOLD}:{state.seq}",
        purpose=CONTINUE_HOLD,
        fire_at=fire_at.isoformat(),
        reason=reason,
    )


def tenant_quotas(rt: Runtime) -> Quotas:
    """This tenant's quotas (cached for a moment: a start of a tenant without quotas
    costs no read; a change made through this engine applies at once)."""
    return rt.caches.quotas.get(rt.store, rt.tenant)


def set_quotas(rt: Runtime, quotas: Quotas, *, by: str) -> Quotas:
    """Store this tenant's quotas (the caller checked who may); return them."""
    try:
        audit = rt.audit_entry(
            "tenant.quotas", rt.tenant, {"quotas": payload_digest(quotas.to_dict())}
        )
        return ledger.set_quotas(rt.store, rt.tenant, quotas, by=by, at=rt.clock.now(), audit=audit)
    finally:
        rt.caches.quotas.forget(rt.tenant)


def quota_usage(rt: Runtime) -> dict[str, Any]:
    """This tenant's quotas, what it used of each daily budget today (UTC) and how many
    of its executions run now.

    `used` holds what the ledger counts (model tokens and cost always; another budget
    once it has a quota: from then on, what counts against it; 0 before any use) and,
    when executions have no quota, the executions started today, counted from the
    executions themselves: the status shows real starts and model usage either way. A
    budget the ledger does not count (activity seconds, stored bytes without a quota) is
    absent (not counted), never 0."""
    now = rt.clock.now()
    running = rt.store.list_executions(
        ExecutionFilter(tenant=rt.tenant, status=ExecutionStatus.RUNNING, limit=10_000)
    )
    quotas = quotas_of(rt.store, rt.tenant)
    used = rt.store.quota_usage(rt.tenant, day_of(now))
    limits = {
        EXECUTIONS: quotas.executions_per_day,
        SECONDS: quotas.activity_seconds_per_day,
        MODEL_TOKENS: quotas.model_tokens_per_day,
        MODEL_COST: quotas.model_cost_per_day,
        STORED: quotas.stored_bytes_per_day,
    }
    for budget, limit in limits.items():
        if limit is not None or budget in (MODEL_TOKENS, MODEL_COST):
            used.setdefault(budget, 0.0)
    if quotas.executions_per_day is None:
        used[EXECUTIONS] = float(started_today(rt, now))
    return {
        "tenant": rt.tenant,
        "day": day_of(now).isoformat(),
        "quotas": quotas.to_dict(),
        "used": used,
        "running": len(running.items),
    }


def started_today(rt: Runtime, now: datetime) -> int:
    """How many executions of this tenant were created on `now`'s UTC day."""
    start = midnight_after(now) - timedelta(days=1)
    count, cursor = 0, None
    while True:
        page = rt.store.list_executions(
            ExecutionFilter(tenant=rt.tenant, created_after=start, limit=10_000, cursor=cursor)
        )
        count += len(page.items)
        if page.next_cursor is None:
            return count
        cursor = page.next_cursor


def attempt_debits(rt: Runtime, seconds: float) -> tuple[Debit, ...]:
    """What attempts that took `seconds` in all debit when their results commit: their
    seconds, when this tenant has an activity-seconds quota (else nothing is written)."""
    if seconds <= 0 or tenant_quotas(rt).activity_seconds_per_day is None:
        return ()
    return (Debit(SECONDS, seconds, day_of(rt.clock.now())),)


def stored_debits(rt: Runtime, stored: int) -> tuple[Debit, ...]:
    """What a step that records `stored` bytes of values debits when it commits (when
    this tenant has a stored-bytes quota; else nothing is written)."""
    return ledger.stored_debits(tenant_quotas(rt), stored, rt.clock.now())


def model_debits(rt: Runtime, tokens: int, cost: float | None) -> tuple[Debit, ...]:
    """What model calls that used `tokens` and `cost` debit in the commit that records
    them (counted with or without a model quota)."""
    return ledger.model_debits(tokens, cost, rt.clock.now())


def model_quota_exhausted(rt: Runtime) -> str | None:
    """Why this tenant may make no model call today (a model quota used up), or None;
    one read of today's usage, only for a tenant with a model quota."""
    quotas = tenant_quotas(rt)
    if quotas.model_tokens_per_day is None and quotas.model_cost_per_day is None:
        return None
    used = rt.store.quota_usage(rt.tenant, day_of(rt.clock.now()))
    return ledger.model_quota_exhausted(quotas, used, rt.tenant)


def quota_hold(
    rt: Runtime, state: ExecutionState, unbilled: float = 0.0, unstored: int = 0
) -> list[Event] | None:
    """Whether the execution in `state` may start its next attempts: None when it may
    (no activity-seconds or stored-bytes quota, or today's seconds and bytes, with the
    `unbilled` seconds of its finished attempts and the `unstored` bytes of its step
    that the same commit debits, not used up); else the events that hold them until
    the next UTC midnight by this engine's clock (a durable timer whose `reason` is the
    execution's `waiting_on`; none when that hold is armed already). One read of
    today's usage, only for a tenant with one of those quotas."""
    quotas = tenant_quotas(rt)
    budgets = (
        (SECONDS, quotas.activity_seconds_per_day, unbilled, "activity seconds"),
        (STORED, quotas.stored_bytes_per_day, unstored, "stored bytes"),
    )
    if all(limit is None for _, limit, _, _ in budgets):
        return None
    now = rt.clock.now()
    used = rt.store.quota_usage(rt.tenant, day_of(now))
    spent = [
        (name, what)
        for name, limit, pending, what in budgets
        if limit is not None and used.get(name, 0.0) + pending >= limit
    ]
    if not spent:
        return None
    name, what = spent[0]
    until = midnight_after(now)
    timer = f"{QUOTA_HOLD}:{name}:{until.date().isoformat()}"
    if timer in state.timers:
        return []
    reason = (
        f"quota: {what} for tenant {rt.tenant} exhausted until {until.date().isoformat()} 00:00 UTC"
    )
    armed = TimerArmed(timer=timer, purpose=QUOTA_HOLD, fire_at=until.isoformat(), reason=reason)
    return [armed.at(now)]


def continue_hold(rt: Runtime, state: ExecutionState, paid: bool = False) -> list[Event] | None:
    """Whether the run in `state`, which its step would end `continued`, may hand over
    to its chain's next run now: None when it may, else the events holding the hand-over
    (a durable timer whose `reason` is the run's `waiting_on`; the decider continues
    nothing while it is armed and tries again when it fires).

    Held until `min_continue_interval` seconds after this run started, so one chain
    starts at most one run per interval; then until the next UTC midnight when the
    tenant's quotas refuse the next run as they would refuse a start (`start_debits`:
    one execution of the day, and the day's seconds, tokens and cost not used up). The
    next run's debit is taken here, in a transaction of its own (check and addition
    one statement, as a start's), unless `paid` (this run's hand-over was admitted
    already, and its commit did not apply)."""
    now = rt.clock.now()
    interval = rt.limits.min_continue_interval
    if interval > 0 and state.created_at:
        ready = datetime.fromisoformat(state.created_at) + timedelta(seconds=interval)
        if ready > now:
            reason = (
                f"continue-as-new: one run of chain {state.chain_root} every {interval:g} s;"
                f" the next no sooner than {ready.isoformat()}"
            )
            return [continue_timer(state, ready, reason).at(now)]
    debits = () if paid else start_debits(tenant_quotas(rt), now)
    refused = rt.store.debit_quota(rt.tenant, debits) if debits else None
    if refused is None:
        return None
    until, limit = midnight_after(now), refused.limit or 0.0
    reason = (
        f"quota: {refused.budget.replace('_', ' ')} per day for tenant {rt.tenant} used up"
        f" (limit {limit:g}); the chain's next run waits until"
        f" {until.date().isoformat()} 00:00 UTC"
    )
    return [continue_timer(state, until, reason).at(now)]
