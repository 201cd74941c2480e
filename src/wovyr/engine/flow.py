"""What a worker asks the store before it starts attempts of activities that declare a
`rate_limit` or a `concurrency` key (`flow_requests`), and the hold it records when the
store says to wait (`flow_hold`): a durable timer (purpose `flow`) whose reason is the
execution's `waiting_on` ("rate limit openai: next slot in 3.2 s"). A held attempt is not
started (no `ActivityStarted`, not a retry) and its execution holds no worker slot until
the timer fires and a worker decides again.

Each attempt asks for its own units and slot (`FlowAsk.parts`): when a step would start
more attempts than the bucket or the key has room for (a map's items, sibling activities),
the leading ones that fit start and the others are held (`FlowAsk.order` names them)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from wovyr.definition.expr import render
from wovyr.definition.model import Workflow
from wovyr.engine.core.context import expression_context
from wovyr.engine.core.policy import RunActivity
from wovyr.engine.core.shown import FLOW_HOLD
from wovyr.engine.core.state import ExecutionState
from wovyr.engine.runtime import Runtime
from wovyr.errors import InputError, NotFound, Problem
from wovyr.events import Event, TimerArmed
from wovyr.store.flow import (
    HOLD_TIMER_PREFIX,
    FlowKey,
    NewRateLimit,
    RateLimitRecord,
    RateRequest,
    SlotClaim,
)

__all__ = [
    "MAX_GRANT_AGE",
    "MAX_KEY_LENGTH",
    "FlowAsk",
    "delete_rate_limit",
    "flow_held",
    "flow_hold",
    "flow_keys",
    "flow_requests",
    "gated",
    "problem_hold",
    "rate_limits",
    "set_rate_limit",
]

_BAD_KEY_WAIT = 60.0  # a key or units that cannot be evaluated: looked at again this late
# A call starts at most this long (seconds) after it took its rate-limit units, or takes
# them again: so a window of T seconds sees at most rate x (T + MAX_GRANT_AGE) + burst
# calls (rate: limit / per).
MAX_GRANT_AGE = 0.2
MAX_KEY_LENGTH = 500  # characters of a concurrency key's value, or a rate limit's key


@dataclass
class FlowAsk:
    """The units and slots a decision's attempts need, and which slot each attempt holds
    (by `RunActivity.key`: released by the commit recording its result)."""

    rates: list[RateRequest] = field(default_factory=list)
    slots: list[SlotClaim] = field(default_factory=list)
    holds: dict[str, tuple[str, str]] = field(default_factory=dict)
    rates_of: dict[str, list[RateRequest]] = field(default_factory=dict)  # by RunActivity.key
    problem: str | None = None  # a key or units that could not be evaluated
    # each gated attempt in order: its RunActivity.key, and how many rates and slots it asks
    order: list[str] = field(default_factory=list)
    parts: list[tuple[int, int]] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.rates or self.slots or self.problem)


def gated(definition: Workflow) -> bool:
    """Whether any activity of `definition` declares a rate limit or a concurrency key."""
    return any(a.rate_limit is not None or a.concurrency is not None for a in definition.activities)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def flow_requests(
    definition: Workflow, state: ExecutionState, runs: Sequence[RunActivity]
) -> FlowAsk:
    ask = FlowAsk()
    for run in runs:
        if run.compensation:
            continue
        act = definition.activity(run.activity_id)
        if act.rate_limit is None and act.concurrency is None:
            continue
        ctx = expression_context(state, {"input": run.input, "index": run.index})
        where = f"activity '{act.id}'"
        ask.order.append(run.key)
        ask.parts.append((int(act.rate_limit is not None), int(act.concurrency is not None)))
        try:
            if act.rate_limit is not None:
                spec = act.rate_limit
                units = spec.units
                if isinstance(units, str):
                    units = float(render(units, ctx, where=f"{where} rate_limit.units"))
                limit = spec.limit
                request = RateRequest(
                    key=_text(render(spec.key, ctx, where=f"{where} rate_limit.key")),
                    units=float(units),
                    capacity=(spec.burst or limit) if limit is not None else None,
                    per_second=limit / spec.per if limit is not None else None,
                )
                ask.rates.append(request)
                ask.rates_of[run.key] = [request]
            if act.concurrency is not None:
                key = _text(render(act.concurrency.key, ctx, where=f"{where} concurrency.key"))
                holder = f"{state.id}/{run.key}/{run.attempt}"
                ask.slots.append(SlotClaim(key, holder, act.concurrency.limit))
                ask.holds[run.key] = (key, holder)
        except Exception as exc:
            ask.problem = f"flow control of {where}: {exc}"
    return ask


def flow_held(state: ExecutionState) -> bool:
    """Is a hold armed: the execution's gated attempts wait for its timer."""
    return any(info.get("purpose") == FLOW_HOLD for info in state.timers.values())


def flow_hold(state: ExecutionState, now: datetime, wait: float, reason: str) -> list[Event]:
    """The events that hold the execution's next attempts `wait` seconds (none when a hold
    is armed already: the execution was woken by something else and goes on waiting)."""
    if flow_held(state):
        return []
    fire_at = now + timedelta(seconds=max(wait, 0.001))
    armed = TimerArmed(
        timer=f"{HOLD_TIMER_PREFIX}{state.seq}",
        purpose=FLOW_HOLD,
        fire_at=fire_at.isoformat(),
        reason=reason,
    )
    return [armed.at(now)]


def problem_hold(state: ExecutionState, now: datetime, problem: str) -> list[Event]:
    return flow_hold(state, now, _BAD_KEY_WAIT, problem)


def set_rate_limit(
    rt: Runtime, key: str, limit: float, per: float, burst: float | None = None, *, by: str = ""
) -> RateLimitRecord:
    """Declare this tenant's token bucket `key`: `limit` units per `per` seconds, at most
    `burst` at once (default `limit`); activities naming it (`rate_limit: {key: ...}`)
    use these numbers, whatever their own say."""
    problems = []
    if not key or len(key) > MAX_KEY_LENGTH:
        problems.append(Problem(f"a key is 1 to {MAX_KEY_LENGTH} characters", path="key"))
    for name, value in (("limit", limit), ("per", per), ("burst", burst)):
        if value is not None and not value > 0:
            problems.append(Problem(f"{name} must be above 0", path=name))
    if problems:
        raise InputError(problems)
    capacity = burst if burst is not None else limit
    numbers = {"limit": limit, "per": per, "burst": capacity}
    audit = rt.audit_entry("limits.set", key, numbers)
    declared = NewRateLimit(rt.tenant, key, capacity, limit / per, by, rt.clock.now())
    return rt.store.set_rate_limit(declared, audit=audit)


def rate_limits(rt: Runtime) -> list[RateLimitRecord]:
    """This tenant's token buckets, declared or made by activities."""
    return rt.store.rate_limits(rt.tenant)


def flow_keys(rt: Runtime) -> list[FlowKey]:
    """This tenant's concurrency keys in use, with what runs and what waits."""
    return rt.store.flow_keys(rt.tenant, rt.clock.now())


def delete_rate_limit(rt: Runtime, key: str) -> None:
    """Forget this tenant's token bucket `key` (NotFound when it has none)."""
    audit = rt.audit_entry("limits.delete", key)
    if not rt.store.delete_rate_limit(rt.tenant, key, audit=audit):
        raise NotFound(f"rate limit {key} not found")
