"""Fair share between tenants on SQLite (in-process worker, ManualClock, no sleeps): tenant A
queues 500 slow executions (each holds its slot until the test hands it a turn), then tenant
B starts one. The bound is in claim rounds and A's completions, not in time:

- fair claim, no cap: B is claimed in the first round after one slot frees, so it completes
  after at most ONE of A's executions (one slot's turn; the plain claim would make it wait
  for A's whole backlog);
- with `max_per_tenant` below the concurrency: B is claimed in the very next round, after
  NONE of A's executions completes;
- by default a worker of 64 slots keeps 8 from any one tenant (`reserved_slots`): the same,
  with no cap set.
"""

from __future__ import annotations

import asyncio
import textwrap
from pathlib import Path

import pytest

from wovyr.activities.base import ActivityRegistry
from wovyr.clock import ManualClock
from wovyr.engine.engine import Engine
from wovyr.engine.quotas import Quotas
from wovyr.store.sqlite import SQLiteStore
from wovyr.worker import Worker

BACKLOG = 500
CONCURRENCY = 4


def one_step(name: str, tool: str) -> str:
    return textwrap.dedent(f"""\
        apiVersion: wovyr/v1
        kind: Workflow
        metadata: {{name: {name}}}
        activities:
          - {{id: s, tool: {tool}}}
        """)


class Turns:
    """A's slow tool: each call waits for a turn the test hands out."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[None] = asyncio.Queue()
        self.done = 0

    async def slow(self) -> str:
        await self.queue.get()
        self.done += 1
        return "slow"


@pytest.fixture
def sqlite_engine(tmp_path: Path, clock: ManualClock) -> Engine:
    return Engine(SQLiteStore(tmp_path / "wovyr.db"), clock=clock, activities=ActivityRegistry())


def queue_backlog(engine: Engine, turns: Turns) -> tuple[Engine, Engine]:
    engine.activities.register("slow", turns.slow)
    engine.activities.register("quick", lambda: "quick")
    a, b = engine.for_tenant("a"), engine.for_tenant("b")
    a.apply(one_step("slow", "slow"))
    b.apply(one_step("quick", "quick"))
    for i in range(BACKLOG):
        a.start(name="slow", execution_id=f"a-{i:03}")
    return a, b


async def one_finishes(worker: Worker) -> None:
    await asyncio.wait(list(worker._tasks.values()), return_when=asyncio.FIRST_COMPLETED)


def tenants_running(worker: Worker) -> list[str]:
    return sorted(tenant for tenant, _ in worker.runners)


@pytest.mark.parametrize("fair", [True, False], ids=["fair", "plain"])
def test_a_backlog_delays_another_tenant_by_one_slots_turn(
    sqlite_engine: Engine, fair: bool
) -> None:
    asyncio.run(one_slots_turn(sqlite_engine, fair))


def test_a_cap_per_tenant_keeps_a_slot_for_another_tenant(sqlite_engine: Engine) -> None:
    asyncio.run(capped(sqlite_engine))


async def one_slots_turn(sqlite_engine: Engine, fair: bool) -> None:
    turns = Turns()
    _, b = queue_backlog(sqlite_engine, turns)
    worker = Worker(sqlite_engine, concurrency=CONCURRENCY, fair_share=fair)
    try:
        assert await worker.tick() == CONCURRENCY  # round 1: A's executions fill the slots
        b.start(name="quick", execution_id="b-1")
        assert await worker.tick() == 0  # round 2: no free slot
        turns.queue.put_nowait(None)  # one of A's executions ends: one slot's turn
        await one_finishes(worker)
        assert await worker.tick() == 1  # round 3: the freed slot
        if not fair:
            # The plain claim gives it to A's backlog: B waits for all of it.
            assert ("b", "b-1") not in worker.runners
            return
        assert ("b", "b-1") in worker.runners
        await one_finishes(worker)
        assert b.get("b-1").status == "completed"
        assert turns.done == 1  # B completed after one of A's 500, not after the backlog
    finally:
        await worker.shutdown(grace_seconds=0)


async def capped(sqlite_engine: Engine) -> None:
    turns = Turns()
    _, b = queue_backlog(sqlite_engine, turns)
    worker = Worker(sqlite_engine, concurrency=CONCURRENCY, max_per_tenant=CONCURRENCY - 1)
    try:
        assert await worker.tick() == CONCURRENCY - 1  # A holds at most its cap
        assert await worker.tick() == 0
        b.start(name="quick", execution_id="b-1")
        assert await worker.tick() == 1  # the next round: B, with none of A's done
        assert tenants_running(worker) == ["a", "a", "a", "b"]
        await one_finishes(worker)
        assert b.get("b-1").status == "completed"
        assert turns.done == 0
    finally:
        await worker.shutdown(grace_seconds=0)


def test_a_stored_slot_cap_applies_to_a_worker(sqlite_engine: Engine) -> None:
    asyncio.run(stored_cap(sqlite_engine))


async def stored_cap(sqlite_engine: Engine) -> None:
    turns = Turns()
    a, b = queue_backlog(sqlite_engine, turns)
    a.set_quotas(Quotas(max_slots=2), by="cli")  # what `wovyr admin quotas set a` stores
    worker = Worker(sqlite_engine, concurrency=CONCURRENCY, max_per_tenant=3)
    try:
        assert await worker.tick() == 2  # the stored cap, below the worker's ceiling of 3
        assert await worker.tick() == 0
        b.start(name="quick", execution_id="b-1")
        assert await worker.tick() == 1
        assert tenants_running(worker) == ["a", "a", "b"]
    finally:
        await worker.shutdown(grace_seconds=0)


@pytest.mark.parametrize("reserved", [None, 0], ids=["default", "off"])
def test_a_tenant_whose_executions_are_all_slow_leaves_the_reserve_to_another(
    sqlite_engine: Engine, reserved: int | None
) -> None:
    """The attack: one tenant's slow executions took all 64 slots of a worker while no other
    tenant had work; a tenant arriving then waited for one of them to end (30 s). An eighth
    of the slots is kept from any one tenant by default (`reserved_slots`)."""
    asyncio.run(reserve(sqlite_engine, reserved))


async def reserve(sqlite_engine: Engine, reserved: int | None) -> None:
    turns = Turns()
    _, b = queue_backlog(sqlite_engine, turns)
    worker = Worker(sqlite_engine, reserved_slots=reserved)  # 64 slots, fair share
    try:
        if reserved == 0:  # the reserve turned off: A fills the worker, B waits its turn
            assert await worker.tick() == 64
            b.start(name="quick", execution_id="b-1")
            assert await worker.tick() == 0
            return
        assert await worker.tick() == 56  # A holds at most 64 - 8
        assert await worker.tick() == 0  # none more of A's backlog
        b.start(name="quick", execution_id="b-1")
        assert await worker.tick() == 1  # the next round: B, with none of A's done
        assert tenants_running(worker).count("b") == 1
        await one_finishes(worker)
        assert b.get("b-1").status == "completed"
        assert turns.done == 0
    finally:
        await worker.shutdown(grace_seconds=0)


def test_the_reserve_is_checked_against_the_concurrency(sqlite_engine: Engine) -> None:
    assert Worker(sqlite_engine, concurrency=7).reserved_slots == 0  # none below 8 slots
    assert Worker(sqlite_engine, concurrency=8).reserved_slots == 1
    assert Worker(sqlite_engine, concurrency=4, reserved_slots=1).shares.ceiling == 3
    capped = Worker(sqlite_engine, concurrency=64, max_per_tenant=10)
    assert (capped.reserved_slots, capped.shares.ceiling) == (8, 10)  # the lower ceiling
    assert Worker(sqlite_engine, concurrency=64, fair_share=False).reserved_slots == 0
    for bad in (-1, 4):
        with pytest.raises(ValueError, match="reserved_slots must be 0 or more and below"):
            Worker(sqlite_engine, concurrency=4, reserved_slots=bad)


def test_the_worker_command_refuses_a_reserve_not_below_its_concurrency(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from wovyr.cli.main import main

    home = ["--home", str(tmp_path / "home")]
    assert main(["worker", "--concurrency", "4", "--reserved-slots", "4", *home]) == 2
    err = capsys.readouterr().err
    assert "--reserved-slots" in err and "4 is not below --concurrency 4" in err
