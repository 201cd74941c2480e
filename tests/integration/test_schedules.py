"""Schedules end to end on every store, with a ManualClock: fires, overlap, catch-up."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from wovyr.clock import ManualClock
from wovyr.engine.engine import Engine
from wovyr.errors import Conflict, InputError, NotFound
from wovyr.scheduling.schedules import Schedules
from wovyr.testing import drain

WAITS = """
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: report}
inputs:
  team: {type: string, default: ops}
activities:
  - id: hold
    wait: {signal: done}
"""
QUICK = """
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: quick}
activities:
  - id: x
    set: {ok: true}
"""


@pytest.fixture
def schedules(engine: Engine) -> Schedules:
    engine.apply(WAITS)
    engine.apply(QUICK)
    return Schedules(engine)


def started(engine: Engine, workflow: str = "report") -> list[str]:
    return sorted(r.id for r in engine.list(workflow=workflow, limit=1000).items)


def test_cron_fires_each_tick_once(
    engine: Engine, clock: ManualClock, schedules: Schedules
) -> None:
    rec = schedules.create("rep", workflow="quick", cron="*/15 * * * *", overlap="allow_all")
    assert rec.next_fire_at == datetime(2030, 1, 1, 9, 15, tzinfo=UTC)
    assert [t.minute for t in schedules.next_fire_times(rec)] == [15, 30, 45, 0, 15]
    drain(engine)
    assert started(engine, "quick") == []
    clock.set(datetime(2030, 1, 1, 9, 15, tzinfo=UTC))
    drain(engine)
    drain(engine)
    assert started(engine, "quick") == ["rep-20300101T091500Z"]
    history = engine.history("rep-20300101T091500Z")
    assert history[0].data["scheduled_at"] == "2030-01-01T09:15:00+00:00"
    assert engine.query("rep-20300101T091500Z").status == "completed"
    assert schedules.get("rep").fired_count == 1


def _tick(engine: Engine, clock: ManualClock, minute: int, hour: int = 9) -> None:
    clock.set(datetime(2030, 1, 1, hour, minute, tzinfo=UTC))
    drain(engine)


def test_overlap_skip(engine: Engine, clock: ManualClock, schedules: Schedules) -> None:
    schedules.create("s", workflow="report", every="15m")
    _tick(engine, clock, 15)
    _tick(engine, clock, 30)
    assert started(engine) == ["s-20300101T091500Z"]
    assert schedules.get("s").skipped_count == 1
    engine.signal("s-20300101T091500Z", "done")
    drain(engine)
    _tick(engine, clock, 45)
    assert started(engine) == ["s-20300101T091500Z", "s-20300101T094500Z"]


def test_overlap_buffer_one(engine: Engine, clock: ManualClock, schedules: Schedules) -> None:
    schedules.create("s", workflow="report", every="15m", overlap="buffer_one")
    _tick(engine, clock, 15)
    _tick(engine, clock, 30)
    _tick(engine, clock, 45)
    rec = schedules.get("s")
    assert rec.buffered == ("2030-01-01T09:30:00+00:00",) and rec.skipped_count == 1
    engine.signal("s-20300101T091500Z", "done")
    drain(engine)
    drain(engine)
    assert started(engine) == ["s-20300101T091500Z", "s-20300101T093000Z"]
    assert schedules.get("s").buffered == ()


def test_overlap_buffer_all(engine: Engine, clock: ManualClock, schedules: Schedules) -> None:
    schedules.create("s", workflow="report", every="15m", overlap="buffer_all")
    for minute in (15, 30, 45):
        _tick(engine, clock, minute)
    assert len(schedules.get("s").buffered) == 2
    engine.signal("s-20300101T091500Z", "done")
    drain(engine)
    drain(engine)
    assert started(engine)[-1] == "s-20300101T093000Z"
    engine.signal("s-20300101T093000Z", "done")
    drain(engine)
    drain(engine)
    assert started(engine) == ["s-20300101T091500Z", "s-20300101T093000Z", "s-20300101T094500Z"]


def test_overlap_cancel_other(engine: Engine, clock: ManualClock, schedules: Schedules) -> None:
    schedules.create("s", workflow="report", every="15m", overlap="cancel_other")
    _tick(engine, clock, 15)
    _tick(engine, clock, 30)
    assert engine.query("s-20300101T091500Z").status == "cancelled"
    assert engine.query("s-20300101T093000Z").status == "waiting"


def test_overlap_allow_all(engine: Engine, clock: ManualClock, schedules: Schedules) -> None:
    schedules.create("s", workflow="report", every="15m", overlap="allow_all")
    _tick(engine, clock, 15)
    _tick(engine, clock, 30)
    assert len(started(engine)) == 2


def test_catch_up_after_three_hours_down(
    engine: Engine, clock: ManualClock, schedules: Schedules
) -> None:
    schedules.create("s", workflow="quick", every="15m", overlap="allow_all", catchup_window="1h")
    clock.set(datetime(2030, 1, 1, 12, 0, tzinfo=UTC))  # 09:15 .. 12:00 missed: 12 ticks
    drain(engine)
    ids = started(engine, "quick")
    assert ids == [
        f"s-20300101T{h:02d}{m:02d}00Z" for h, m in ((11, 0), (11, 15), (11, 30), (11, 45), (12, 0))
    ]
    rec = schedules.get("s")
    assert rec.missed_count == 7 and rec.fired_count == 5
    assert rec.next_fire_at == datetime(2030, 1, 1, 12, 15, tzinfo=UTC)


def test_catch_up_with_skip_runs_one(
    engine: Engine, clock: ManualClock, schedules: Schedules
) -> None:
    schedules.create("s", workflow="report", every="15m", catchup_window="1h")
    clock.set(datetime(2030, 1, 1, 12, 0, tzinfo=UTC))
    drain(engine)
    assert started(engine) == ["s-20300101T110000Z"]
    rec = schedules.get("s")
    assert (rec.missed_count, rec.skipped_count) == (7, 4)


def test_two_dispatchers_never_fire_a_tick_twice(
    engine: Engine, clock: ManualClock, schedules: Schedules
) -> None:
    schedules.create("s", workflow="quick", every="15m", overlap="allow_all")
    clock.set(datetime(2030, 1, 1, 9, 15, tzinfo=UTC))
    other = Schedules(engine)
    stale = engine.store.get_schedule("s")  # type: ignore[attr-defined]
    assert schedules.dispatch_due() == 1
    assert other._fire(stale, clock.now()) == 0  # its compare-and-set loses
    assert other.dispatch_due() == 0
    assert started(engine, "quick") == ["s-20300101T091500Z"]


def test_pause_and_resume_do_not_replay(
    engine: Engine, clock: ManualClock, schedules: Schedules
) -> None:
    schedules.create("s", workflow="quick", every="15m", overlap="allow_all")
    schedules.pause("s", note="maintenance")
    assert schedules.get("s").note == "maintenance"
    _tick(engine, clock, 50)
    assert started(engine, "quick") == []
    rec = schedules.resume("s")
    assert rec.next_fire_at == datetime(2030, 1, 1, 10, 0, tzinfo=UTC)
    _tick(engine, clock, 0, hour=10)
    assert started(engine, "quick") == ["s-20300101T100000Z"]


def test_trigger_backfill_update_delete(
    engine: Engine, clock: ManualClock, schedules: Schedules
) -> None:
    schedules.create("s", workflow="quick", cron="0 * * * *")
    manual = schedules.trigger("s")
    start = datetime(2029, 12, 31, 20, 0, tzinfo=UTC)
    ids = schedules.backfill("s", start, start + timedelta(hours=3))
    assert len(ids) == 3
    assert schedules.backfill("s", start, start + timedelta(hours=3)) == ids
    assert len(started(engine, "quick")) == 4 and manual in started(engine, "quick")
    rec = schedules.update("s", cron="30 9 * * *", timezone="Europe/Berlin")
    assert rec.next_fire_at == datetime(2030, 1, 2, 8, 30, tzinfo=UTC)
    schedules.delete("s")
    with pytest.raises(NotFound):
        schedules.get("s")


def test_start_end_and_limit(engine: Engine, clock: ManualClock, schedules: Schedules) -> None:
    schedules.create(
        "s",
        workflow="quick",
        every="15m",
        overlap="allow_all",
        start_at=datetime(2030, 1, 1, 10, 0, tzinfo=UTC),
        remaining_actions=2,
    )
    assert schedules.get("s").next_fire_at == datetime(2030, 1, 1, 10, 0, tzinfo=UTC)
    for minute in (0, 15, 30):
        _tick(engine, clock, minute, hour=10)
    assert len(started(engine, "quick")) == 2
    rec = schedules.get("s")
    assert rec.remaining_actions == 0 and rec.next_fire_at is None


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"workflow": "quick", "cron": "61 * * * *"}, InputError),
        ({"workflow": "quick", "cron": "* * * *"}, InputError),
        ({"workflow": "quick", "cron": "0 9 * * *", "timezone": "Mars/Olympus"}, InputError),
        ({"workflow": "quick", "every": "0s"}, InputError),
        ({"workflow": "quick", "every": "-5m"}, InputError),
        ({"workflow": "nope", "every": "5m"}, NotFound),
        ({"workflow": "quick", "every": "5m", "overlap": "sometimes"}, InputError),
        ({"workflow": "report", "every": "5m", "input": {"tem": "x"}}, InputError),
    ],
)
def test_bad_schedules_store_nothing(schedules: Schedules, kwargs: dict, error: type) -> None:
    with pytest.raises(error):
        schedules.create("bad", **kwargs)
    assert schedules.list() == []


def test_duplicate_id_conflicts(schedules: Schedules) -> None:
    schedules.create("s", workflow="quick", every="5m")
    with pytest.raises(Conflict):
        schedules.create("s", workflow="quick", every="10m")


def test_tick_ids_are_unique_below_a_second() -> None:
    from wovyr.scheduling.schedules import tick_execution_id

    base = datetime(2030, 1, 1, 9, 0, tzinfo=UTC)
    ids = {tick_execution_id("s", base + timedelta(milliseconds=50 * i)) for i in range(40)}
    assert len(ids) == 40
    assert tick_execution_id("s", base) == "s-20300101T090000Z"


def test_tenants_with_the_same_schedule_id_each_get_their_tick(
    engine: Engine, clock: ManualClock, schedules: Schedules
) -> None:
    other = engine.for_tenant("b")
    other.register(QUICK)
    other.apply(QUICK)
    engine.apply(QUICK)
    schedules.create("same", workflow="quick", every="15m")
    Schedules(other).create("same", workflow="quick", every="15m")
    _tick(engine, clock, 15)
    assert [r.id for r in engine.list(workflow="quick").items] == ["same-20300101T091500Z"]
    assert [r.id for r in other.list(workflow="quick").items] == ["same-20300101T091500Z"]


def test_a_start_beyond_representable_time_is_an_input_error(schedules: Schedules) -> None:
    with pytest.raises(InputError):
        schedules.create(
            "far",
            workflow="quick",
            cron="0 0 1 1 *",
            start_at=datetime(9999, 12, 31, 23, 59, tzinfo=UTC),
        )
    assert schedules.list() == []


CHAINED = """
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: chained}
inputs:
  n: {type: integer, default: 1}
activities:
  - id: hold
    wait: {signal: done}
output: "${{ inputs.n }}"
continue_as_new: {when: "${{ inputs.n < 3 }}", input: {n: "${{ inputs.n + 1 }}"}}
"""


def test_a_tick_that_continued_as_new_still_runs_as_its_chain(
    engine: Engine, clock: ManualClock, schedules: Schedules
) -> None:
    engine.apply(CHAINED)
    schedules.create("c", workflow="chained", every="15m")  # overlap: skip
    first = "c-20300101T091500Z"
    _tick(engine, clock, 15)
    clock.advance(1)  # a chain starts at most one run a second (min_continue_interval)
    engine.signal(first, "done")  # run 1 continues as c-...~c2, which waits
    drain(engine)
    assert engine.query(first, follow=False).status == "continued"
    _tick(engine, clock, 30)
    assert started(engine, "chained") == [first, f"{first}~c2"]  # the tick was skipped
    assert schedules.get("c").skipped_count == 1
    for _ in range(2):  # runs 2 and 3 end the chain
        clock.advance(1)
        engine.signal(first, "done")
        drain(engine)
    assert engine.query(first).id == f"{first}~c3"
    assert engine.query(first).status == "completed"
    _tick(engine, clock, 45)
    assert "c-20300101T094500Z" in started(engine, "chained")


def test_cancel_other_cancels_a_chains_live_run(
    engine: Engine, clock: ManualClock, schedules: Schedules
) -> None:
    engine.apply(CHAINED)
    schedules.create("c", workflow="chained", every="15m", overlap="cancel_other")
    first = "c-20300101T091500Z"
    _tick(engine, clock, 15)
    clock.advance(1)  # a chain starts at most one run a second (min_continue_interval)
    engine.signal(first, "done")
    drain(engine)
    _tick(engine, clock, 30)
    assert engine.query(first).id == f"{first}~c2"
    assert engine.query(first).status == "cancelled"
    assert engine.query("c-20300101T093000Z").status == "waiting"
