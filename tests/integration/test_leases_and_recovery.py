"""Leases, fences and recovery of attempts lost with a worker (in-process, ManualClock)."""

from __future__ import annotations

import asyncio
import textwrap

import pytest

from wovyr.activities.base import ActivityContext, ActivityRegistry
from wovyr.clock import ManualClock
from wovyr.engine.core.state import fold, state_from_json
from wovyr.engine.engine import Engine
from wovyr.engine.steps import make_step
from wovyr.events import Event
from wovyr.store.base import ClaimAsk, CommitOutcome, Store
from wovyr.testing import drain
from wovyr.worker import Worker

ONE_STEP = textwrap.dedent("""
    apiVersion: wovyr/v1
    kind: Workflow
    metadata: {name: one}
    activities:
      - id: s
        tool: slow
        retry: {max_attempts: 3, initial_interval: 0}
    """)


def test_stale_owner_commits_nothing(engine: Engine, clock: ManualClock) -> None:
    rec = engine.start(ONE_STEP)
    store = engine.store
    [a] = store.claim(ClaimAsk("A", clock.now(), 30, 10))
    assert store.claim(ClaimAsk("B", clock.now(), 30, 10)) == []  # A's lease is live
    clock.advance(31)
    [b] = store.claim(ClaimAsk("B", clock.now(), 30, 10))
    assert b.fence == a.fence + 1
    state = state_from_json(a.checkpoint)
    events = [Event("SignalReceived", clock.now(), {"name": "x", "payload": 1})]
    stale = make_step(
        rec.id,
        state,
        fold(events, state),
        events,
        clock.now(),
        tenant=rec.tenant,
        fence=a.fence,
        ready=True,
    )
    assert store.commit([stale]) == [CommitOutcome.LEASE_LOST]
    fresh = make_step(
        rec.id,
        state,
        fold(events, state),
        events,
        clock.now(),
        tenant=rec.tenant,
        fence=b.fence,
        ready=True,
    )
    assert store.commit([fresh]) == [CommitOutcome.OK]
    assert [e.type for e in store.history(rec.id, tenant="default")][-1] == "SignalReceived"
    assert len(store.history(rec.id, tenant="default")) == state.seq + 1


def test_renew_reports_fence_and_seq(engine: Engine, clock: ManualClock) -> None:
    rec = engine.start(ONE_STEP)
    [claim] = engine.store.claim(ClaimAsk("A", clock.now(), 30, 10))
    leases = engine.store.renew_leases("A", clock.now(), 30)
    assert leases[rec.key].fence == claim.fence and leases[rec.key].seq == claim.seq
    engine.signal(rec.id, "poke")
    assert engine.store.renew_leases("A", clock.now(), 30)[rec.key].seq == claim.seq + 1
    assert engine.store.release_owner("A") == 1
    assert engine.store.renew_leases("A", clock.now(), 30) == {}


async def _crash_mid_activity(engine: Engine, started: asyncio.Event) -> None:
    """Run a worker until the attempt is inside the handler, then vanish (no release)."""
    worker = Worker(engine, lease_seconds=30)
    task = asyncio.create_task(worker.run_until_idle())
    await started.wait()
    task.cancel()  # a crash: the lease stays, the ActivityStarted is durable
    with pytest.raises(asyncio.CancelledError):
        await task
    for t in list(worker._tasks.values()):
        t.cancel()
    worker.committer.close()
    engine.remove_listener(worker._on_change)


HOLDER: dict[str, asyncio.Event] = {}


def _crash_times(engine: Engine, clock: ManualClock, times: int, *, expire: bool = True) -> None:
    """`times` workers each die while the attempt is inside the handler; after each, the
    clock passes the lease (unless `expire` is False for the last) so the next takes over."""
    for n in range(times):

        async def main() -> None:
            HOLDER["started"] = asyncio.Event()  # bound to this run's event loop
            await _crash_mid_activity(engine, HOLDER["started"])

        asyncio.run(main())
        if expire or n < times - 1:
            clock.advance(31)


def _register_crashing(registry: ActivityRegistry, crashes: int) -> list[tuple[int, str]]:
    """`slow` hangs (its worker is then killed) on its first `crashes` runs, then returns."""
    effects: list[tuple[int, str]] = []

    async def slow(ctx: ActivityContext) -> str:
        effects.append((ctx.attempt, ctx.idempotency_key))
        if len(effects) <= crashes:
            HOLDER["started"].set()
            await asyncio.Event().wait()
        return "done"

    registry.register("slow", slow)
    return effects


def test_attempt_lost_with_a_worker_is_recorded_then_rerun(
    engine: Engine, clock: ManualClock, registry: ActivityRegistry
) -> None:
    effects = _register_crashing(registry, crashes=1)
    rec = engine.start(ONE_STEP)
    _crash_times(engine, clock, 1, expire=False)
    drain(engine)  # the lease is still live: nothing to claim
    assert [a for a, _ in effects] == [1]
    assert engine.query(rec.id).activities["s"]["status"] == "running"
    clock.advance(31)
    drain(engine)
    view = engine.query(rec.id)
    assert view.status == "completed"
    # the same attempt ran again, with the same idempotency key: the handler can deduplicate
    assert effects == [(1, f"{rec.id}/s/1"), (1, f"{rec.id}/s/1")]
    assert view.activities["s"]["attempt"] == 1
    history = engine.history(rec.id)
    assert [e.type for e in history if e.type == "ActivityFailed"] == []
    started = [e.data for e in history if e.type == "ActivityStarted"]
    assert started == [
        {"activity": "s", "attempt": 1, "key": f"{rec.id}/s/1"},
        {"activity": "s", "attempt": 1, "key": f"{rec.id}/s/1", "recovery": 1},
    ]
    # the re-run was durable before it ran: its ActivityStarted precedes the result
    kinds = [e.type for e in history]
    assert kinds.index("ActivityCompleted") > max(
        i for i, k in enumerate(kinds) if k == "ActivityStarted"
    )


def test_a_step_lost_more_often_than_its_max_attempts_still_completes(
    engine: Engine, clock: ManualClock, registry: ActivityRegistry
) -> None:
    """Crashes are not the activity's failures: four lost runs of a step with
    `max_attempts: 3` leave it running, and it completes when the handler returns."""
    effects = _register_crashing(registry, crashes=4)
    rec = engine.start(ONE_STEP)
    _crash_times(engine, clock, 4)
    drain(engine)
    view = engine.query(rec.id)
    assert view.status == "completed", view.error
    assert view.output is None and view.activities["s"]["output"] == "done"
    assert effects == [(1, f"{rec.id}/s/1")] * 5
    history = engine.history(rec.id)
    recoveries = [e.data.get("recovery") for e in history if e.type == "ActivityStarted"]
    assert recoveries == [None, 1, 2, 3, 4]
    assert not [e for e in history if e.type == "ActivityFailed"]


def test_a_poison_activity_ends_when_its_recovery_budget_is_spent(
    engine: Engine, clock: ManualClock, registry: ActivityRegistry
) -> None:
    """An activity that kills its worker every time is re-run `max_recoveries` times (20 by
    default), then fails for good with RecoveryBudgetExhausted, whatever its retry policy."""
    assert engine.max_recoveries == 20
    effects = _register_crashing(registry, crashes=10**6)
    rec = engine.start(ONE_STEP)
    _crash_times(engine, clock, 21)  # the first run and 20 recoveries
    drain(engine)  # the 21st loss spends the budget: nothing runs again
    view = engine.query(rec.id)
    assert len(effects) == 21 and {a for a, _ in effects} == {1}
    assert view.status == "failed"
    error = view.activities["s"]["error"]
    assert error["type"] == "RecoveryBudgetExhausted"
    assert "lost its worker 21 times" in error["message"]
    assert "max_recoveries" in error["message"]
    assert error["details"] == {"lost": 21, "max_recoveries": 20}
    failed = [e.data for e in engine.history(rec.id) if e.type == "ActivityFailed"]
    assert len(failed) == 1 and failed[0]["will_retry"] is False


def test_the_recovery_budget_is_the_engines_to_set(
    store: Store, clock: ManualClock, registry: ActivityRegistry
) -> None:
    engine = Engine(store, clock=clock, activities=registry, max_recoveries=2)
    assert engine.for_tenant("other").max_recoveries == 2
    effects = _register_crashing(registry, crashes=10**6)
    rec = engine.start(ONE_STEP)
    _crash_times(engine, clock, 3)
    drain(engine)
    assert len(effects) == 3
    view = engine.query(rec.id)
    assert view.status == "failed"
    assert view.activities["s"]["error"]["details"] == {"lost": 3, "max_recoveries": 2}
    with pytest.raises(ValueError, match="max_recoveries"):
        Engine(store, clock=clock, max_recoveries=-1)
