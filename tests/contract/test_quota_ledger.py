"""The quota ledger on every store: debits in the transaction of the write they pay for,
refused at the limit (nothing written), and two racing starts for the last unit: one wins.
The same for a debit of its own (a continue-as-new hand-over) and the cap on schedules."""

from __future__ import annotations

import threading
from dataclasses import replace
from datetime import UTC, date, datetime

import pytest

from wovyr.errors import QuotaExceeded
from wovyr.events import ExecutionStarted
from wovyr.store.base import NewExecution, StepWrite, Store
from wovyr.store.postgres import PostgresStore
from wovyr.store.records import Debit
from wovyr.store.schedules import ScheduleRecord
from wovyr.store.sqlite import SQLiteStore

DAY = date(2030, 1, 1)
AT = datetime(2030, 1, 1, 9, tzinfo=UTC)


def _new(
    execution_id: str, *debits: Debit, tenant: str = "t1", max_running: int | None = None
) -> NewExecution:
    event = ExecutionStarted(
        workflow="w",
        version="1",
        definition_hash="h",
        input={},
        parent_id=None,
        timeout=None,
        activities=[],
    ).at(AT)
    step = StepWrite(execution_id, 0, [event], {"seq": 1}, "running", AT, ready=True, tenant=tenant)
    return NewExecution(
        execution_id, tenant, "w", "1", "h", AT, {}, step, debits=debits, max_running=max_running
    )


def _one(limit: float | None = 3) -> Debit:
    return Debit("executions", 1, DAY, limit, retry_after=42.0)


def test_debits_within_the_limit_then_refuses_and_writes_nothing(store: Store) -> None:
    for i in range(3):
        created, _ = store.create_execution(_new(f"e{i}", _one()))
        assert created
    assert store.quota_usage("t1", DAY) == {"executions": 3.0}
    with pytest.raises(QuotaExceeded) as refused:
        store.create_execution(_new("e3", _one()))
    assert refused.value.retry_after == 42.0
    assert refused.value.budget == "executions_per_day"
    assert store.load("e3", "t1") is None  # the start and its debit rolled back together
    assert store.quota_usage("t1", DAY) == {"executions": 3.0}
    # another day, another tenant: their own rows
    assert store.create_execution(_new("e4", Debit("executions", 1, date(2030, 1, 2), 3)))[0]
    assert store.create_execution(_new("e0", _one(), tenant="t2"))[0]
    # an id that exists is found, not debited
    created, _ = store.create_execution(_new("e0", _one(limit=None)))
    assert not created
    assert store.quota_usage("t1", DAY) == {"executions": 3.0}


def test_a_gate_refuses_once_the_budget_is_used_and_steps_always_debit(store: Store) -> None:
    assert store.create_execution(_new("a", Debit("activity_seconds", 0, DAY, 5)))[0]
    step = StepWrite(
        "a", 1, [], {"seq": 1}, "running", AT, ready=True, tenant="t1",
        debits=[Debit("activity_seconds", 7.5, DAY, 5)],
    )  # fmt: skip
    assert [o.value for o in store.commit([step])] == ["ok"]  # work done is never refused
    assert store.quota_usage("t1", DAY) == {"activity_seconds": 7.5}
    with pytest.raises(QuotaExceeded):
        store.create_execution(_new("b", Debit("activity_seconds", 0, DAY, 5)))


def test_concurrent_executions_count_the_running_ones(store: Store) -> None:
    assert store.create_execution(_new("r1", max_running=2))[0]
    assert store.create_execution(_new("r2", max_running=2))[0]
    with pytest.raises(QuotaExceeded) as refused:
        store.create_execution(_new("r3", max_running=2))
    assert refused.value.budget == "concurrent_executions"
    assert store.create_execution(_new("r3", max_running=2, tenant="t2"))[0]


def _second(store: Store) -> Store:
    """Another store object over the same data (another server), or the same in memory."""
    if isinstance(store, SQLiteStore):
        return SQLiteStore(store.path)
    if isinstance(store, PostgresStore):
        return PostgresStore(store.url, max_size=2)
    return store


def _race(stores: tuple[Store, Store], debit: Debit, tag: str) -> list[str]:
    """Both stores start an execution that debits `debit` at once; what each got."""
    barrier = threading.Barrier(2)
    outcomes: list[str] = []

    def start(s: Store, name: str) -> None:
        barrier.wait()
        try:
            s.create_execution(_new(name, debit))
            outcomes.append("won")
        except QuotaExceeded:
            outcomes.append("refused")

    threads = [
        threading.Thread(target=start, args=(s, f"race-{tag}-{i}")) for i, s in enumerate(stores)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sorted(outcomes)


def test_two_writers_race_for_the_last_unit_one_wins(store: Store) -> None:
    other = _second(store)
    try:
        for day in range(1, 4):  # three races, each for the only unit of a fresh day
            debit = Debit("executions", 1, date(2030, 2, day), 1)
            assert _race((store, other), debit, str(day)) == ["refused", "won"]
            assert store.quota_usage("t1", debit.day) == {"executions": 1.0}
    finally:
        if other is not store:
            other.close()


def test_a_debit_of_its_own_is_checked_and_all_or_nothing(store: Store) -> None:
    """`debit_quota`: what admits a continue-as-new hand-over (one transaction, no write)."""
    gate = Debit("activity_seconds", 0, DAY, 5)
    for _ in range(3):
        assert store.debit_quota("t1", (_one(), gate)) is None
    refused = store.debit_quota("t1", (gate, _one()))
    assert refused == _one()  # the one that refused it, nothing added
    assert store.quota_usage("t1", DAY) == {"executions": 3.0, "activity_seconds": 0.0}
    with pytest.raises(QuotaExceeded):  # a start sees the same ledger
        store.create_execution(_new("late", _one()))
    assert store.debit_quota("t2", (_one(),)) is None  # another tenant: its own row
    step = StepWrite(
        "x", 0, [], {"seq": 1}, "running", AT, ready=True, tenant="t1",
        debits=[Debit("activity_seconds", 6, DAY)],
    )  # fmt: skip
    assert store.create_execution(_new("x"))[0] and store.commit([replace(step, expected_seq=1)])
    refused = store.debit_quota("t1", (Debit("executions", 1, DAY, 10), gate))
    assert refused == gate  # the seconds are used up: the execution unit is not taken
    assert store.quota_usage("t1", DAY) == {"executions": 3.0, "activity_seconds": 6.0}


def test_two_writers_race_for_the_last_unit_of_their_own_one_wins(store: Store) -> None:
    other = _second(store)
    try:
        debit = Debit("executions", 1, date(2030, 3, 1), 1)
        barrier = threading.Barrier(2)
        answers: list[Debit | None] = []

        def take(s: Store) -> None:
            barrier.wait()
            answers.append(s.debit_quota("t1", (debit,)))

        threads = [threading.Thread(target=take, args=(s,)) for s in (store, other)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(answers, key=lambda a: a is not None) == [None, debit]
        assert store.quota_usage("t1", debit.day) == {"executions": 1.0}
    finally:
        if other is not store:
            other.close()


def _schedule(schedule_id: str, tenant: str = "t1") -> ScheduleRecord:
    return ScheduleRecord(
        id=schedule_id, workflow="w", spec={"every": 60.0}, created_at=AT, updated_at=AT,
        tenant=tenant,
    )  # fmt: skip


def test_a_schedule_past_the_tenants_cap_is_refused_and_two_racing_take_one(
    store: Store,
) -> None:
    assert store.create_schedule(_schedule("a"), max_count=2)
    assert not store.create_schedule(_schedule("a"), max_count=5)  # the id exists
    assert store.create_schedule(_schedule("a", tenant="t2"), max_count=1)  # its own count
    other = _second(store)
    try:
        barrier = threading.Barrier(2)
        outcomes: list[str] = []

        def create(s: Store, name: str) -> None:
            barrier.wait()
            try:
                outcomes.append(
                    "created" if s.create_schedule(_schedule(name), max_count=2) else ""
                )
            except QuotaExceeded as exc:
                outcomes.append(exc.budget)

        threads = [
            threading.Thread(target=create, args=(s, f"race-{i}"))
            for i, s in enumerate((store, other))
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(outcomes) == ["created", "max_schedules"]
    finally:
        if other is not store:
            other.close()
    assert len(store.list_schedules("t1")) == 2
    assert store.create_schedule(_schedule("b"))  # no cap given: none applies
