"""Contract: priority within a tenant, on every store. The claim (plain, fair, by turns)
takes the lowest `claim_rank` among free rows: higher priority first, and aging bounds how
long a lower priority waits (`PRIORITY_AGING_SECONDS` per level of difference)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from wovyr.clock import ManualClock
from wovyr.engine.engine import Engine
from wovyr.errors import InputError
from wovyr.events import Event
from wovyr.store.base import ClaimAsk, FairShare, NewExecution, StepWrite, Store
from wovyr.store.records import PRIORITY_AGING_SECONDS, claim_rank
from wovyr.store.sqlite import SQLiteStore
from wovyr.worker.worker import Worker

T0 = datetime(2030, 1, 1, tzinfo=UTC)

WORKFLOW = """
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: prio}
activities:
  - id: a
    set: {x: 1}
"""


def start(store: Store, tenant: str, execution_id: str, at: datetime, priority: int = 0) -> None:
    first = StepWrite(
        execution_id=execution_id,
        expected_seq=0,
        events=[Event("ExecutionStarted", at, {})],
        checkpoint={},
        status="running",
        updated_at=at,
        ready=True,
        tenant=tenant,
    )
    created, _ = store.create_execution(
        NewExecution(
            id=execution_id,
            tenant=tenant,
            workflow="wf",
            version="1",
            definition_hash="h",
            created_at=at,
            input=None,
            first_step=first,
            priority=priority,
        )
    )
    assert created


def backlog(store: Store, tenant: str, n: int, at: datetime = T0) -> None:
    for i in range(n):
        start(store, tenant, f"{tenant}-{i:03}", at + timedelta(milliseconds=i))


def test_the_rank_is_the_start_less_the_aging_of_the_priority() -> None:
    assert claim_rank(T0, 0) - claim_rank(T0, 9) == 9 * PRIORITY_AGING_SECONDS * 1_000_000
    later = T0 + timedelta(seconds=PRIORITY_AGING_SECONDS)
    assert claim_rank(later, 1) == claim_rank(T0, 0)


@pytest.mark.parametrize("how", ["plain", "fair", "turns"])
def test_a_high_priority_start_overtakes_a_backlog(store: Store, how: str) -> None:
    backlog(store, "a", 40)
    start(store, "a", "urgent", T0 + timedelta(seconds=1), priority=9)
    start(store, "b", "b-0", T0 + timedelta(seconds=1))  # another tenant keeps its turn
    fair = {"plain": None, "fair": FairShare(), "turns": FairShare(turns={"a": 1, "b": 1})}[how]
    got = store.claim(ClaimAsk("W", T0 + timedelta(seconds=2), 30, 2, fair=fair))
    keys = [c.key for c in got]
    if how == "plain":  # one queue: the urgent one, then the oldest
        assert sorted(keys) == [("a", "a-000"), ("a", "urgent")]
        first = 1
    else:  # each tenant's turn: the urgent one is A's first
        assert sorted(keys) == [("a", "urgent"), ("b", "b-0")]
        first = 0
    # then the backlog in start order
    rest = store.claim(ClaimAsk("W", T0 + timedelta(seconds=2), 30, 3))
    assert sorted(c.execution_id for c in rest) == [f"a-{i:03}" for i in range(first, first + 3)]


def test_aging_bounds_the_wait_of_a_low_priority(store: Store) -> None:
    # A priority-0 start waiting longer than 9 levels of aging goes before a priority-9 one.
    old = T0 - timedelta(seconds=9 * PRIORITY_AGING_SECONDS + 1)
    start(store, "a", "old-low", old)
    start(store, "a", "new-high", T0, priority=9)
    start(store, "a", "mid", T0 - timedelta(seconds=PRIORITY_AGING_SECONDS), priority=5)
    assert [c.execution_id for c in store.claim(ClaimAsk("W", T0, 30, 1))] == ["old-low"]
    assert [c.execution_id for c in store.claim(ClaimAsk("W", T0, 30, 1))] == ["new-high"]
    assert [c.execution_id for c in store.claim(ClaimAsk("W", T0, 30, 1))] == ["mid"]


def test_free_rows_come_before_expired_leases_whatever_the_priority(store: Store) -> None:
    start(store, "a", "low", T0)
    [first] = store.claim(ClaimAsk("W", T0, 1, 1))
    assert first.execution_id == "low"
    start(store, "a", "high", T0, priority=9)
    start(store, "a", "low2", T0 + timedelta(seconds=1))
    later = T0 + timedelta(seconds=5)  # "low"'s lease expired: it is claimable again
    assert [c.execution_id for c in store.claim(ClaimAsk("W2", later, 30, 1))] == ["high"]
    assert [c.execution_id for c in store.claim(ClaimAsk("W2", later, 30, 1))] == ["low2"]
    assert [c.execution_id for c in store.claim(ClaimAsk("W2", later, 30, 1))] == ["low"]


def test_a_priority_9_start_is_claimed_in_the_next_claim_round(
    engine: Engine, clock: ManualClock
) -> None:
    """The engine's start path and a worker's fair claim: 200 priority-0 executions wait,
    then a priority-9 start; the worker's next claim round (one slot) takes it."""
    for i in range(200):
        engine.start(WORKFLOW, {}, execution_id=f"bulk-{i:03}")
        clock.advance(0.001)
    urgent = engine.start(WORKFLOW, {}, execution_id="urgent", priority=9)
    assert engine.query(urgent.id).priority == 9

    async def one_round() -> list[str]:
        worker = Worker(engine, concurrency=1)
        try:
            await worker.tick()
            return [key[1] for key in worker.runners]
        finally:
            await worker.close()

    assert asyncio.run(one_round()) == ["urgent"]
    assert engine.store.load("bulk-000", engine.tenant).fence == 0  # type: ignore[union-attr]


@pytest.mark.parametrize("bad", [-1, 10, True, "9"])
def test_a_priority_outside_0_to_9_is_refused_and_nothing_starts(bad: object) -> None:
    engine = Engine(SQLiteStore())
    with pytest.raises(InputError, match="priority must be an integer from 0 to 9"):
        engine.start(WORKFLOW, {}, execution_id="x", priority=bad)  # type: ignore[arg-type]
    assert engine.store.load("x", engine.tenant) is None
