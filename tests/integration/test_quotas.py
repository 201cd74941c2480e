"""Quotas end to end on every store, with a ManualClock: the daily count survives a new
engine (a restart) and resets at the UTC day boundary; schedules over quota record skipped
fires; activity seconds debit the attempts' durations; the minimum schedule interval; the
cap on a tenant's schedules."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

from wovyr.activities.base import ActivityRegistry
from wovyr.clock import ManualClock
from wovyr.engine.engine import Engine
from wovyr.engine.quotas import Quotas
from wovyr.errors import InputError, QuotaExceeded
from wovyr.scheduling.schedules import Schedules
from wovyr.store.base import Store
from wovyr.testing import drain

QUICK = """
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: quick}
activities:
  - id: x
    set: {ok: true}
"""
SLOW = """
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: slow}
activities:
  - id: a
    tool: take
    with: {seconds: 2.5}
  - id: b
    needs: [a]
    tool: take
    with: {seconds: 4}
"""
HOLD = """
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: hold}
activities:
  - id: w
    wait: {signal: go}
"""


def test_the_fourth_start_is_refused_until_the_next_utc_day(
    store: Store, clock: ManualClock, engine: Engine
) -> None:
    engine.set_quotas(Quotas(executions_per_day=3), by="test")
    for _ in range(3):
        engine.start(QUICK)
    with pytest.raises(QuotaExceeded) as refused:
        engine.start(QUICK)
    # 09:00 UTC: fifteen hours to midnight
    assert refused.value.retry_after == 15 * 3600
    assert len(engine.list(limit=10).items) == 3
    # a restart: a new engine over the same store still refuses the same day
    again = Engine(store, clock=clock)
    clock.set(datetime(2030, 1, 1, 23, 59, 59, tzinfo=UTC))
    with pytest.raises(QuotaExceeded) as still:
        again.start(QUICK)
    assert still.value.retry_after == 1
    clock.set(datetime(2030, 1, 2, 0, 0, tzinfo=UTC))
    again.start(QUICK)
    assert store.quota_usage("default", date(2030, 1, 2)) == {"executions": 1.0}
    assert store.quota_usage("default", date(2030, 1, 1)) == {"executions": 3.0}


def test_concurrent_executions_refuse_while_that_many_run(engine: Engine) -> None:
    engine.set_quotas(Quotas(concurrent_executions=1), by="test")
    first = engine.start(HOLD)
    with pytest.raises(QuotaExceeded) as refused:
        engine.start(HOLD)
    assert refused.value.budget == "concurrent_executions"
    assert 0 < refused.value.retry_after < 60
    engine.cancel(first.id)
    engine.start(HOLD)


def test_a_schedule_over_quota_records_skipped_fires(engine: Engine, clock: ManualClock) -> None:
    engine.apply(QUICK)
    engine.set_quotas(Quotas(executions_per_day=2), by="test")
    schedules = Schedules(engine)
    schedules.create("tick", workflow="quick", every="1m", overlap="allow_all")
    for _ in range(4):
        clock.advance(60)
        schedules.dispatch_due()
    record = schedules.get("tick")
    assert record.fired_count == 2
    assert record.skipped_count == 2
    skipped = [fire for fire in record.recent if "skipped" in fire]
    assert len(skipped) == 2
    assert "executions per day is 2" in skipped[0]["skipped"]
    assert len(engine.list(workflow="quick", limit=10).items) == 2


def test_activity_seconds_debit_the_attempts_durations(
    store: Store, clock: ManualClock, registry: ActivityRegistry, engine: Engine
) -> None:
    @registry.activity("take")
    def take(seconds: float) -> dict[str, float]:
        clock.advance(seconds)  # the attempt takes exactly this long by the engine's clock
        return {"took": seconds}

    engine.set_quotas(Quotas(activity_seconds_per_day=5), by="test")
    started = engine.start(SLOW)
    drain(engine)
    assert engine.query(started.id).status == "completed"
    assert store.quota_usage("default", date(2030, 1, 1)) == {"activity_seconds": 6.5}
    # the day's seconds are used up (work done is never refused): new starts are
    with pytest.raises(QuotaExceeded) as refused:
        engine.start(SLOW)
    assert refused.value.budget == "activity_seconds_per_day"


def test_schedules_faster_than_the_minimum_interval_are_refused(engine: Engine) -> None:
    engine.apply(QUICK)
    schedules = Schedules(engine)
    for every in ("1ms", "0.5s"):  # the store-wide minimum: 1 s by default
        with pytest.raises(InputError, match="minimum interval"):
            schedules.create("fast", workflow="quick", every=every)
    schedules.create("ok", workflow="quick", every="1s")
    engine.set_quotas(Quotas(max_schedule_rate=0.5), by="test")  # once in two minutes
    with pytest.raises(InputError, match="max-schedule-rate"):
        schedules.update("ok", every="10s")
    with pytest.raises(InputError, match="max-schedule-rate"):
        schedules.create("cron", workflow="quick", cron="* * * * *")
    schedules.create("slow", workflow="quick", every="5m")


def test_a_tenant_has_at_most_max_schedules_schedules(engine: Engine, clock: ManualClock) -> None:
    """The attack: 200 schedules fired 4,124 runs in 22 s. Each creation past the cap is
    refused, nothing written; another tenant's schedules do not count."""
    engine.apply(QUICK)
    schedules = Schedules(engine)
    engine.set_quotas(Quotas(max_schedules=2), by="test")
    schedules.create("one", workflow="quick", every="1m")
    schedules.create("two", workflow="quick", every="1m")
    for name in ("three", "two"):  # a taken id is over the cap too: the cap is checked first
        with pytest.raises(QuotaExceeded) as refused:
            schedules.create(name, workflow="quick", every="1m")
        assert refused.value.budget == "max_schedules" and refused.value.limit == 2
        assert "at most 2 schedules" in str(refused.value)
    assert [r.id for r in schedules.list()] == ["one", "two"]
    other = engine.for_tenant("acme")
    other.apply(QUICK)
    Schedules(other).create("three", workflow="quick", every="1m")  # acme has no cap
    schedules.delete("one")
    schedules.create("three", workflow="quick", every="1m")  # room again
    engine.set_quotas(Quotas(max_schedules=0), by="test")
    with pytest.raises(QuotaExceeded):
        schedules.create("four", workflow="quick", every="1m")
    assert [r.id for r in schedules.list()] == ["three", "two"]


def test_used_up_activity_seconds_hold_the_next_attempt_until_the_next_utc_day(
    store: Store, clock: ManualClock, registry: ActivityRegistry, engine: Engine
) -> None:
    took: list[float] = []

    @registry.activity("take")
    def take(seconds: float) -> dict[str, float]:
        clock.advance(seconds)  # the attempt takes exactly this long by the engine's clock
        took.append(seconds)
        return {"took": seconds}

    engine.set_quotas(Quotas(activity_seconds_per_day=2), by="test")
    started = engine.start(SLOW)  # a takes 2.5 s, then b 4 s
    drain(engine)
    # a's attempt finished (and counts, past the limit); b's is not started: it waits.
    view = engine.query(started.id)
    assert took == [2.5]
    assert view.status == "waiting"
    held = "quota: activity seconds for tenant default exhausted until 2030-01-02 00:00 UTC"
    assert view.waiting_on == held
    assert [a["status"] for a in view.activities.values()] == ["completed", "pending"]
    record = store.load(started.id, "default")
    assert record is not None and record.waiting_on == held and not record.ready
    assert store.quota_usage("default", date(2030, 1, 1)) == {"activity_seconds": 2.5}
    # a signal wakes it the same day: still held, nothing runs
    clock.set(datetime(2030, 1, 1, 23, 59, 59, tzinfo=UTC))
    engine.signal(started.id, "nudge")
    drain(engine)
    assert took == [2.5] and engine.query(started.id).waiting_on == held
    # the next UTC day: the hold's timer fires and b runs
    clock.set(datetime(2030, 1, 2, tzinfo=UTC))
    drain(engine)
    assert took == [2.5, 4.0]
    assert engine.query(started.id).status == "completed"
    assert store.quota_usage("default", date(2030, 1, 2)) == {"activity_seconds": 4.0}
    assert store.quota_usage("default", date(2030, 1, 1)) == {"activity_seconds": 2.5}
    # what the hold recorded: a durable timer to midnight and its fire
    timers = [
        (e.type, e.data.get("purpose"), e.data.get("fire_at"))
        for e in engine.history(started.id)
        if e.type.startswith("Timer")
    ]
    assert timers[0] == ("TimerArmed", "quota", "2030-01-02T00:00:00+00:00")
    assert timers[-1][0] == "TimerFired"
