"""The ScheduleStore contract on every store: create, read, the due list (due by time first,
then those holding a buffered tick), compare-and-set updates and deletes."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from wovyr.errors import QuotaExceeded
from wovyr.store.base import Store
from wovyr.store.schedules import ScheduleRecord, ScheduleWrite

T0 = datetime(2030, 1, 1, 9, 0, tzinfo=UTC)


def _schedule(sid: str, **kw: object) -> ScheduleRecord:
    return replace(ScheduleRecord(sid, "wf", {"every": 60.0}, T0, T0, tenant="t1"), **kw)  # type: ignore[arg-type]


def test_a_schedule_is_created_once_and_read_back_as_written(store: Store) -> None:
    record = _schedule(
        "s1",
        input={"a": [1, {"b": None}]},
        paused=True,
        note="n",
        next_fire_at=T0 + timedelta(minutes=1),
        buffered=("2030-01-01T09:00:00+00:00",),
        recent=({"tick": "x", "execution_id": "e1"},),
    )
    assert store.create_schedule(record)
    assert not store.create_schedule(replace(record, note="other"))
    assert store.get_schedule("s1", "t1") == record
    assert store.get_schedule("s1", "t2") is None
    assert store.list_schedules("t1") == [record]


def test_the_tenant_quota_counts_its_schedules(store: Store) -> None:
    assert store.create_schedule(_schedule("s1"), max_count=1)
    with pytest.raises(QuotaExceeded):
        store.create_schedule(_schedule("s2"), max_count=1)
    assert [s.id for s in store.list_schedules("t1")] == ["s1"]


def test_due_schedules_come_by_time_then_buffered(store: Store) -> None:
    store.create_schedule(_schedule("late", next_fire_at=T0 + timedelta(minutes=2)))
    store.create_schedule(_schedule("due2", next_fire_at=T0 - timedelta(minutes=1)))
    store.create_schedule(_schedule("due1", next_fire_at=T0 - timedelta(minutes=2)))
    store.create_schedule(_schedule("held", buffered=("tick",)))
    store.create_schedule(_schedule("paused", buffered=("tick",), paused=True))
    assert [s.id for s in store.due_schedules(T0, 10)] == ["due1", "due2", "held"]
    assert [s.id for s in store.due_schedules(T0, 1)] == ["due1", "held"]


def test_an_update_is_a_compare_and_set_and_a_delete_happens_once(store: Store) -> None:
    store.create_schedule(_schedule("s1"))
    moved = _schedule("s1", version=1, fired_count=3, last_fire_at=T0)
    assert store.update_schedule(ScheduleWrite(moved, expected_version=0))
    assert not store.update_schedule(ScheduleWrite(replace(moved, version=2), expected_version=0))
    assert store.get_schedule("s1", "t1") == moved
    assert store.delete_schedule("s1", "t1")
    assert not store.delete_schedule("s1", "t1")
