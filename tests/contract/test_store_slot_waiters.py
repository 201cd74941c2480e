"""Contract: attempts waiting for an activity concurrency slot are served in the order they
began to wait, on every store: a slot that frees is kept for the oldest waiter (a later
one is refused, and told how many wait before it); a waiter whose execution ended, or
that did not come back within WAITER_TTL_SECONDS, loses its place. Across connections
too: threads, each with its own store on the same database, take a key's one slot in
the order they queued for it."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import make_store
from tests.contract.test_store_fair_claim import start

from wovyr.store.base import ClaimAsk, CommitOutcome, StepWrite, Store
from wovyr.store.flow import (
    HOLD_TIMER_PREFIX,
    WAITER_TTL_SECONDS,
    FlowAcquire,
    FlowKey,
    RateRequest,
    SlotClaim,
)

T0 = datetime(2030, 1, 1, tzinfo=UTC)


def running(store: Store, *names: str) -> None:
    for name in names:
        start(store, "t", name, T0)
    assert len(store.claim(ClaimAsk("W", T0, 3600, len(names)))) == len(names)


def ask(store: Store, name: str, at: datetime = T0, limit: int = 1) -> tuple[bool, str]:
    slot = SlotClaim("k", f"{name}/a/1", limit)
    answer = store.acquire_flow(FlowAcquire("t", name, "W", at, slots=[slot]))
    return answer.granted, answer.reason


def write(store: Store, name: str, *, atomic: bool = False, **fields: Any) -> None:
    """A step of `name`'s execution (`fields` beside an empty one), which must apply."""
    record = store.load(name, "t")
    assert record is not None
    step = StepWrite(
        execution_id=name,
        expected_seq=record.seq,
        events=[],
        checkpoint={},
        status=fields.pop("status", "running"),
        updated_at=T0,
        fence=record.fence,
        tenant="t",
        **fields,
    )
    assert store.commit([step], atomic=atomic) == [CommitOutcome.OK]


def end_attempt(store: Store, name: str, *, status: str = "running", atomic: bool = False) -> None:
    """The step that records `name`'s attempt's result (and releases its slot)."""
    write(store, name, atomic=atomic, status=status, flow_released=[("k", f"{name}/a/1")])


def test_a_freed_slot_goes_to_the_oldest_waiter(store: Store) -> None:
    running(store, "e1", "e2", "e3", "e4")
    assert ask(store, "e1") == (True, "")
    assert ask(store, "e2") == (False, "concurrency k: 1 running (e1/a/1)")
    assert ask(store, "e3") == (False, "concurrency k: 1 running (e1/a/1), 1 waiting before it")
    end_attempt(store, "e1")
    # e3 looks first: the slot is kept for e2, which began to wait before it
    assert ask(store, "e3") == (False, "concurrency k: 0 of 1 running, 1 waiting before it")
    assert ask(store, "e4") == (False, "concurrency k: 0 of 1 running, 2 waiting before it")
    assert ask(store, "e2") == (True, "")
    end_attempt(store, "e2")
    assert ask(store, "e4")[0] is False  # e3 is next
    assert ask(store, "e3") == (True, "")
    assert store.activity_slot_holders("t", "k", T0) == ["e3/a/1"]


def test_room_for_the_waiters_and_more_is_given_at_once(store: Store) -> None:
    running(store, "e1", "e2", "e3")
    assert ask(store, "e1", limit=2) == (True, "")
    assert ask(store, "e2", limit=1)[0] is False  # a smaller limit for the same key
    assert ask(store, "e3", limit=3) == (True, "")  # 1 running + 1 waiting < 3


def test_a_waiter_that_ended_or_left_loses_its_place(store: Store) -> None:
    running(store, "e1", "e2", "e3", "e4")
    assert ask(store, "e1") == (True, "")
    assert not ask(store, "e2")[0] and not ask(store, "e3")[0]
    end_attempt(store, "e1")
    record = store.load("e2", "t")
    assert record is not None
    cancelled = StepWrite(
        execution_id="e2",
        expected_seq=record.seq,
        events=[],
        checkpoint={},
        status="cancelled",
        updated_at=T0,
        fence=record.fence,
        tenant="t",
        release_lease=True,
    )
    assert store.commit([cancelled]) == [CommitOutcome.OK]
    assert ask(store, "e3") == (True, "")  # e2 ended: e3 is the oldest waiter now
    assert not ask(store, "e4")[0]
    end_attempt(store, "e3")
    # e4 waits; it does not come back in time, and a newcomer is served
    later = T0 + timedelta(seconds=WAITER_TTL_SECONDS + 1)
    start(store, "t", "e5", T0)
    assert [c.execution_id for c in store.claim(ClaimAsk("W", later, 3600, 1))] == ["e5"]
    assert ask(store, "e5", at=later) == (True, "")


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_waiters_on_several_connections_are_served_in_order(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = request.getfixturevalue("migrated_postgres_url") if kind == "postgres" else None
    first = make_store(kind, tmp_path, url)
    others = [make_store(kind, tmp_path, url) for _ in range(3)]
    try:
        names = [f"w{i}" for i in range(6)]
        running(first, "h", *names)
        assert ask(first, "h") == (True, "")
        stores = {name: others[i % len(others)] for i, name in enumerate(names)}
        for name in names:  # they begin to wait in this order
            assert not ask(stores[name], name)[0]
        served: list[str] = []
        lock = threading.Lock()

        def wait_turn(name: str) -> None:
            store = stores[name]
            while not ask(store, name)[0]:
                pass
            with lock:
                served.append(name)
            end_attempt(store, name)

        threads = [threading.Thread(target=wait_turn, args=(n,)) for n in reversed(names)]
        for thread in threads:
            thread.start()
        end_attempt(first, "h")
        for thread in threads:
            thread.join(timeout=60)
        assert served == names
    finally:
        for s in (first, *others):
            s.close()


def test_flow_keys_say_what_runs_and_what_waits(store: Store) -> None:
    running(store, "e1", "e2", "e3")
    assert store.flow_keys("t", T0) == []
    assert ask(store, "e1") == (True, "")
    assert not ask(store, "e2")[0] and not ask(store, "e3")[0]
    assert store.flow_keys("t", T0) == [FlowKey("activity", "k", 1, 2)]
    assert store.flow_keys("u", T0) == []  # per tenant
    later = T0 + timedelta(seconds=WAITER_TTL_SECONDS + 1)
    assert store.flow_keys("t", later) == [FlowKey("activity", "k", 1, 0)]  # they left


def hold(store: Store, name: str, fire_at: datetime, *timers: str) -> None:
    """`name`'s attempts held by a gate: its durable timers (`flow:<seq>` the hold)."""
    write(store, name, timers_armed=[(t, fire_at) for t in timers])


def due(store: Store, at: datetime) -> set[tuple[str, str]]:
    return {(t.execution_id, t.timer_id) for t in store.due_timers(at, 100)}


@pytest.mark.parametrize("atomic", [False, True])  # PostgreSQL: batched, step by step
def test_a_freed_slot_wakes_its_oldest_waiter(store: Store, atomic: bool) -> None:
    """The step that frees a slot moves the hold of the key's oldest waiter whose execution
    has not ended to its own time: it looks again at once, not at its recheck. One waiter
    per slot freed; other timers and later waiters keep their times."""
    running(store, "e1", "e2", "e3", "e4")
    recheck = T0 + timedelta(seconds=30)
    assert ask(store, "e1") == (True, "")
    for name in ("e2", "e3", "e4"):
        assert not ask(store, name)[0]
        hold(store, name, recheck, f"{HOLD_TIMER_PREFIX}{name}", "sleep:1")
    finish(store, "e2")  # the oldest waiter ended: the next one is woken instead
    assert due(store, T0) == set()
    end_attempt(store, "e1", atomic=atomic)
    assert due(store, T0) == {("e3", f"{HOLD_TIMER_PREFIX}e3")}
    assert ("e4", f"{HOLD_TIMER_PREFIX}e4") in due(store, recheck)  # e4 keeps its time


def finish(store: Store, name: str) -> None:
    write(store, name, status="cancelled", ready=False, release_lease=True)


def test_a_woken_waiter_held_by_a_rate_limit_waits_its_own_time(store: Store) -> None:
    """A wake is spent when the waiter looks again: refused then by a rate limit (its slot
    free), the hold it arms for the rate limit is not made due at once (else it would look
    again and again until the bucket refills)."""
    running(store, "e1", "e2", "e3")
    rate = RateRequest("r", 1, capacity=1, per_second=0.001)
    # The only unit:
    assert store.acquire_flow(FlowAcquire("t", "e3", "W", T0, rates=[rate])).granted
    assert ask(store, "e1") == (True, "")
    assert not ask(store, "e2")[0]
    hold(store, "e2", T0 + timedelta(seconds=30), f"{HOLD_TIMER_PREFIX}1")
    end_attempt(store, "e1")  # wakes e2
    assert due(store, T0) == {("e2", f"{HOLD_TIMER_PREFIX}1")}
    slot = SlotClaim("k", "e2/a/1", 1)
    answer = store.acquire_flow(FlowAcquire("t", "e2", "W", T0, rates=[rate], slots=[slot]))
    assert not answer.granted and answer.reason.startswith("rate limit r")
    hold(store, "e2", T0 + timedelta(seconds=30), f"{HOLD_TIMER_PREFIX}2")
    assert ("e2", f"{HOLD_TIMER_PREFIX}2") not in due(store, T0)
