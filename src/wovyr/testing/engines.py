"""Engines for tests: on a `memory://` store and a ManualClock, driven in the test's
thread (`drain`), time skipped to the next timer (`drain(skip_time=True)`), and a worker
that dies in the middle of a step as a killed process would (`crash`)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from wovyr.activities.base import ActivityRegistry
from wovyr.activities.providers import Providers
from wovyr.clock import ManualClock
from wovyr.engine.engine import Engine
from wovyr.store import open_store
from wovyr.worker import Worker

__all__ = ["EPOCH", "CrashPoint", "crash", "drain", "memory_engine"]

EPOCH = datetime(2030, 1, 1, tzinfo=UTC)  # where a test's ManualClock starts
_MAX_SKIPS = 10_000


def memory_engine(
    activities: ActivityRegistry | None = None,
    start: datetime | None = None,
    *,
    clock: ManualClock | None = None,
    providers: Providers | None = None,
) -> Engine:
    """An engine over a fresh `memory://` store (SQLite in a temporary folder, removed when
    the engine is closed) and a ManualClock (`clock`, or one at `start`)."""
    clock = clock or ManualClock(start or EPOCH)
    return Engine(open_store("memory://"), clock=clock, activities=activities, providers=providers)


def drain(
    engine: Engine,
    *,
    only: list[str] | None = None,
    lease_seconds: float = 30.0,
    skip_time: bool = False,
) -> None:
    """Drive every runnable execution (and due timer) until nothing is runnable now. With
    `skip_time`, then move the engine's ManualClock to the next timer (a sleep, a retry's
    back-off, a timeout) and drive again, until no timer is left: a workflow that waits
    days runs in no time."""

    async def main() -> None:
        worker = Worker(engine, lease_seconds=lease_seconds)
        try:
            await worker.run_until_idle(only=only)
        finally:
            await worker.close()

    asyncio.run(main())
    if not skip_time:
        return
    clock = engine.clock
    if not isinstance(clock, ManualClock):
        raise TypeError("skip_time needs an engine on a ManualClock")
    for _ in range(_MAX_SKIPS):
        at = engine.store.next_timer_at()
        if at is None:
            return
        if at > clock.now():
            clock.set(at)
        asyncio.run(main())
    raise RuntimeError(f"timers still fire after {_MAX_SKIPS} skips (a timer loop?)")


class CrashPoint:
    """A place in an async tool where the test's worker dies: `await point()` makes the
    worker vanish there (its lease kept, nothing more committed, as a killed process) the
    first `times` runs; later runs pass through. `hits` counts the crashes."""

    def __init__(self, times: int = 1) -> None:
        self.times = times
        self.hits = 0
        self._reached: asyncio.Event | None = None

    async def __call__(self) -> None:
        if self.hits >= self.times or self._reached is None:
            return
        self.hits += 1
        self._reached.set()
        await asyncio.Event().wait()  # until the crash cancels this run


def crash(engine: Engine, point: CrashPoint, *, lease_seconds: float = 30.0) -> None:
    """Drive `engine` until a tool reaches `point`, then kill the worker there: its run
    is abandoned mid-step (the attempt's start is durable, its end never comes) and the
    ManualClock is moved past its lease, so the next `drain` recovers the execution as a
    new worker would after a crash. AssertionError when nothing reached the point."""

    async def main() -> None:
        point._reached = reached = asyncio.Event()
        worker = Worker(engine, lease_seconds=lease_seconds)
        run = asyncio.create_task(worker.run_until_idle())
        waiter = asyncio.create_task(reached.wait())
        try:
            await asyncio.wait({run, waiter}, return_when=asyncio.FIRST_COMPLETED)
            if not reached.is_set():
                await worker.close()
                run.result()
                raise AssertionError("no step reached the crash point")
        finally:
            waiter.cancel()
            point._reached = None
        # the kill: nothing of this worker runs or commits again, and it releases nothing
        run.cancel()
        for task in list(worker._tasks.values()):
            task.cancel()
        await asyncio.gather(run, *worker._tasks.values(), return_exceptions=True)
        worker.committer.close()
        engine.remove_listener(worker._on_change)

    asyncio.run(main())
    clock = engine.clock
    if not isinstance(clock, ManualClock):
        raise TypeError("crash needs an engine on a ManualClock (to pass the lease)")
    clock.advance(lease_seconds + 1)
