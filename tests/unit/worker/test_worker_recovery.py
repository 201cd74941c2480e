"""The worker survives store failures: a commit whose outcome is unknown (applied or not)
resumes from the stored checkpoint; a lease held with no runner (a claim whose answer was
lost) is adopted on the second heartbeat; its own expired lease taken again carries on."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from wovyr.activities.base import ActivityContext, ActivityRegistry
from wovyr.clock import ManualClock
from wovyr.engine.engine import Engine
from wovyr.errors import StoreUnavailable
from wovyr.store.base import ClaimAsk, CommitOutcome, StepWrite
from wovyr.store.sqlite import SQLiteStore
from wovyr.worker import Worker

TWO_STEPS = """
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: two}
activities:
  - {id: a, tool: effect, retry: {max_attempts: 5, initial_interval: 0}}
  - {id: b, tool: effect, needs: [a], retry: {max_attempts: 5, initial_interval: 0}}
"""


class FlakyStore(SQLiteStore):
    """Fails the commits numbered in `fail_at`: applied first ('applied') or not ('lost')."""

    def __init__(self, fail_at: dict[int, str]) -> None:
        super().__init__()
        self.fail_at = dict(fail_at)
        self.calls = 0

    def commit(self, steps: Sequence[StepWrite], atomic: bool = False) -> list[CommitOutcome]:
        self.calls += 1
        mode = self.fail_at.pop(self.calls, None)
        if mode == "lost":
            raise StoreUnavailable("the connection died before the write")
        outcomes = super().commit(steps, atomic)
        if mode == "applied":
            raise StoreUnavailable("the connection died after the write")
        return outcomes


def effects_engine(store: SQLiteStore, clock: ManualClock) -> tuple[Engine, list[Any]]:
    seen: list[Any] = []
    registry = ActivityRegistry()

    async def effect(ctx: ActivityContext) -> str:
        seen.append((ctx.activity_id, ctx.attempt))
        return "ok"

    registry.register("effect", effect)
    return Engine(store, clock=clock, activities=registry), seen


def drive(engine: Engine) -> Worker:
    async def main() -> Worker:
        worker = Worker(engine, owner="w")
        try:
            await worker.run_until_idle()
        finally:
            await worker.close()
        return worker

    return asyncio.run(main())


@pytest.mark.parametrize(
    ("mode", "ran", "recovered"),
    [
        # Applied: `a` is recorded; `b` was recorded as started but never ran: it runs again.
        ("applied", [("a", 1), ("b", 1)], [("b", 1)]),
        # Not applied: `a`'s result is gone; its attempt 1 was lost and runs again.
        ("lost", [("a", 1), ("a", 1), ("b", 1)], [("a", 1)]),
    ],
)
def test_a_commit_of_unknown_outcome_resumes_from_the_store(
    clock: ManualClock, mode: str, ran: list[tuple[str, int]], recovered: list[tuple[str, int]]
) -> None:
    store = FlakyStore({2: mode})  # commit 1 starts `a`, commit 2 records it and starts `b`
    engine, seen = effects_engine(store, clock)
    ex = engine.start(TWO_STEPS).id
    worker = drive(engine)
    assert engine.query(ex).status == "completed"
    assert worker.stats.resumed == 1 and worker.stats.store_errors == 1
    assert seen == ran
    history = engine.history(ex)
    done = [e.data["activity"] for e in history if e.type == "ActivityCompleted"]
    assert done == ["a", "b"]  # each result recorded once
    again = [
        (e.data["activity"], e.data["attempt"])
        for e in history
        if e.type == "ActivityStarted" and e.data.get("recovery") == 1
    ]
    assert again == recovered  # every re-run is recorded before it runs, as a recovery
    assert not [e for e in history if e.type == "ActivityFailed"]  # and is no failure


def test_a_lease_nobody_drives_is_adopted_on_the_second_heartbeat(clock: ManualClock) -> None:
    store = SQLiteStore()
    engine, seen = effects_engine(store, clock)
    ex = engine.start(TWO_STEPS).id

    async def main() -> None:
        worker = Worker(engine, owner="w")
        try:
            [_] = store.claim(ClaimAsk("w", clock.now(), 30, 10))  # a claim whose answer was lost
            await worker.heartbeat()
            assert worker.stats.adopted == 0 and not worker.runners  # maybe a start in flight
            await worker.heartbeat()
            assert worker.stats.adopted == 1 and ("default", ex) in worker.runners
            await asyncio.wait(list(worker._tasks.values()))
        finally:
            await worker.close()

    asyncio.run(main())
    assert engine.query(ex).status == "completed"
    assert seen == [("a", 1), ("b", 1)]


def test_its_own_expired_lease_taken_again_carries_on(clock: ManualClock) -> None:
    store = SQLiteStore()
    engine, seen = effects_engine(store, clock)
    gate = asyncio.Event()
    entered = asyncio.Event()

    async def slow(ctx: ActivityContext) -> str:
        seen.append((ctx.activity_id, ctx.attempt))
        entered.set()
        await gate.wait()
        return "ok"

    engine.activities.register("effect", slow)
    ex = engine.start(TWO_STEPS).id

    async def main() -> None:
        nonlocal gate, entered
        gate, entered = asyncio.Event(), asyncio.Event()
        worker = Worker(engine, owner="w", lease_seconds=30)
        try:
            assert await worker.tick() == 1
            await asyncio.wait_for(entered.wait(), 10)  # `a` is running
            clock.advance(31)  # no heartbeat came: our lease expired...
            assert await worker.tick() == 0  # ...and we took it again ourselves
            runner = worker.runners[("default", ex)]
            record = store.load(ex, "default")
            assert record is not None and runner.fence == record.fence == 2
            gate.set()
            await asyncio.wait(list(worker._tasks.values()))
        finally:
            await worker.close()

    asyncio.run(main())
    assert engine.query(ex).status == "completed"
    assert seen == [("a", 1), ("b", 1)]  # nothing re-run, nothing refused


def test_its_own_expired_lease_taken_again_after_another_write_carries_on(
    clock: ManualClock, tmp_path: Path
) -> None:
    """Between the lease running out and the worker taking it again the log moved (here a
    signal; in a busy worker, the runner's own commit whose answer it has not read yet): no
    other worker held it (the fence moved by our claim alone), so the runner carries on and
    nothing runs twice."""
    db = tmp_path / "w.db"
    store = SQLiteStore(db)
    engine, seen = effects_engine(store, clock)  # type: ignore[arg-type]
    gate = asyncio.Event()
    entered = asyncio.Event()

    async def slow(ctx: ActivityContext) -> str:
        seen.append((ctx.activity_id, ctx.attempt))
        entered.set()
        await gate.wait()
        return "ok"

    engine.activities.register("effect", slow)
    ex = engine.start(TWO_STEPS).id

    async def main() -> None:
        nonlocal gate, entered
        gate, entered = asyncio.Event(), asyncio.Event()
        worker = Worker(engine, owner="w", lease_seconds=30)
        try:
            assert await worker.tick() == 1
            await asyncio.wait_for(entered.wait(), 10)  # `a` is running
            # the log moves on, written by another process (no wake-up reaches the runner)
            other = Engine(SQLiteStore(db), clock=clock)
            other.signal(ex, "unheard", {"n": 1})
            other.close()
            record = store.load(ex, "default")
            assert record is not None and worker.runners[("default", ex)].seq < record.seq
            clock.advance(31)  # no heartbeat came: our lease expired...
            assert await worker.tick() == 0  # ...and we took it again ourselves
            runner = worker.runners[("default", ex)]
            assert not runner.stats.lease_lost
            gate.set()
            await asyncio.wait(list(worker._tasks.values()))
        finally:
            await worker.close()

    asyncio.run(main())
    assert engine.query(ex).status == "completed"
    assert seen == [("a", 1), ("b", 1)]  # nothing re-run
