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
from wovyr.store.base import CommitOutcome
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
    [a] = store.claim("A", clock.now(), 30, 10)
    assert store.claim("B", clock.now(), 30, 10) == []  # A's lease is live
    clock.advance(31)
    [b] = store.claim("B", clock.now(), 30, 10)
    assert b.fence == a.fence + 1
    state = state_from_json(a.checkpoint)
    events = [Event("SignalReceived", clock.now(), {"name": "x", "payload": 1})]
    stale = make_step(
        rec.id, state, fold(events, state), events, clock.now(), fence=a.fence, ready=True
    )
    assert store.commit([stale]) == [CommitOutcome.LEASE_LOST]
    fresh = make_step(
        rec.id, state, fold(events, state), events, clock.now(), fence=b.fence, ready=True
    )
    assert store.commit([fresh]) == [CommitOutcome.OK]
    assert [e.type for e in store.history(rec.id)][-1] == "SignalReceived"
    assert len(store.history(rec.id)) == state.seq + 1


def test_renew_reports_fence_and_seq(engine: Engine, clock: ManualClock) -> None:
    rec = engine.start(ONE_STEP)
    [claim] = engine.store.claim("A", clock.now(), 30, 10)
    leases = engine.store.renew_leases("A", clock.now(), 30)
    assert leases[rec.id].fence == claim.fence and leases[rec.id].seq == claim.seq
    engine.signal(rec.id, "poke")
    assert engine.store.renew_leases("A", clock.now(), 30)[rec.id].seq == claim.seq + 1
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


def test_attempt_lost_with_a_worker_is_recorded_then_rerun(
    engine: Engine, clock: ManualClock, registry: ActivityRegistry
) -> None:
    effects: list[int] = []
    crash_next = [True]

    async def slow(ctx: ActivityContext) -> str:
        effects.append(ctx.attempt)
        if crash_next[0]:
            crash_next[0] = False
            started.set()
            await asyncio.Event().wait()
        return "done"

    registry.register("slow", slow)
    rec = engine.start(ONE_STEP)
    started = asyncio.Event()

    async def main() -> None:
        nonlocal started
        started = asyncio.Event()  # bound to this run's event loop
        await _crash_mid_activity(engine, started)

    asyncio.run(main())
    drain(engine)  # the lease is still live: nothing to claim
    assert effects == [1]
    assert engine.query(rec.id).activities["s"]["status"] == "running"
    clock.advance(31)
    drain(engine)
    view = engine.query(rec.id)
    assert view.status == "completed"
    assert effects == [1, 2]
    history = engine.history(rec.id)
    lost = [e for e in history if e.type == "ActivityFailed"]
    assert lost[0].data["error"]["type"] == "WorkerLost" and lost[0].data["attempt"] == 1
    started_attempts = [e.data["attempt"] for e in history if e.type == "ActivityStarted"]
    assert started_attempts == [1, 2]
    # the new attempt was durable before it ran: its ActivityStarted precedes the result
    kinds = [e.type for e in history]
    assert kinds.index("ActivityCompleted") > max(
        i for i, k in enumerate(kinds) if k == "ActivityStarted"
    )


def test_poison_activity_fails_after_max_attempts(
    engine: Engine, clock: ManualClock, registry: ActivityRegistry
) -> None:
    effects: list[int] = []
    holder: dict[str, asyncio.Event] = {}

    async def slow(ctx: ActivityContext) -> str:
        effects.append(ctx.attempt)
        holder["started"].set()
        await asyncio.Event().wait()
        return "never"

    registry.register("slow", slow)
    rec = engine.start(ONE_STEP)
    for _ in range(3):

        async def main() -> None:
            holder["started"] = asyncio.Event()
            await _crash_mid_activity(engine, holder["started"])

        asyncio.run(main())
        clock.advance(31)
    drain(engine)
    view = engine.query(rec.id)
    assert effects == [1, 2, 3]
    assert view.status == "failed"
    assert view.activities["s"]["error"]["type"] == "WorkerLost"
