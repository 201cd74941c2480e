"""The commit hooks on every store: observers hear of creations, commits and claims after
they committed, and an observer that fails changes nothing about the write."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from wovyr.events import Event
from wovyr.store.base import Claim, ClaimAsk, CommitOutcome, NewExecution, StepWrite, Store
from wovyr.store.schedules import ScheduleRecord, ScheduleWrite

T0 = datetime(2030, 1, 1, tzinfo=UTC)


def step(execution_id: str, seq: int) -> StepWrite:
    return StepWrite(
        execution_id=execution_id,
        expected_seq=seq,
        events=[Event("Thing", T0, {"i": seq})],
        checkpoint={"seq": seq + 1},
        status="running",
        updated_at=T0,
        ready=True,
    )


def new(execution_id: str) -> NewExecution:
    return NewExecution(execution_id, "default", "wf", "1", "h", T0, {}, step(execution_id, 0))


def create(store: Store, execution_id: str) -> None:
    created, _ = store.create_execution(new(execution_id))
    assert created


class Recorder:
    def __init__(self) -> None:
        self.seen: list[tuple[str, object]] = []

    def created(self, new: NewExecution) -> None:
        self.seen.append(("created", new.id))

    def committed(self, steps: Sequence[StepWrite], outcomes: Sequence[CommitOutcome]) -> None:
        self.seen.append(
            ("committed", [(s.execution_id, o) for s, o in zip(steps, outcomes, strict=True)])
        )

    def claimed(self, claims: Sequence[Claim]) -> None:
        self.seen.append(("claimed", [c.execution_id for c in claims]))


class Failing:
    def created(self, new: NewExecution) -> None:
        raise RuntimeError("observer broke on created")

    def committed(self, steps: Sequence[StepWrite], outcomes: Sequence[CommitOutcome]) -> None:
        raise RuntimeError("observer broke on committed")

    def claimed(self, claims: Sequence[Claim]) -> None:
        raise RuntimeError("observer broke on claimed")


def test_observers_hear_creations_commits_and_claims(store: Store) -> None:
    recorder = Recorder()
    store.add_observer(recorder)
    create(store, "a")
    assert store.create_execution(new("a"))[0] is False
    create(store, "b")
    store.commit([step("a", 1), step("b", 7)])
    store.commit([step("a", 2), step("b", 1)], atomic=False)
    assert store.claim(ClaimAsk("w", T0, 30, 10, only=["zzz"])) == []
    store.claim(ClaimAsk("w", T0, 30, 10, only=["a"]))
    assert recorder.seen == [
        ("created", "a"),  # the second create of "a" inserted nothing: not reported
        ("created", "b"),
        ("committed", [("a", CommitOutcome.OK), ("b", CommitOutcome.CONFLICT)]),
        ("committed", [("a", CommitOutcome.OK), ("b", CommitOutcome.OK)]),
        ("claimed", ["a"]),  # an empty claim is not reported
    ]


def test_an_atomic_batch_that_is_refused_is_reported_with_its_outcomes(store: Store) -> None:
    create(store, "a")
    recorder = Recorder()
    store.add_observer(recorder)
    outcomes = store.commit([step("a", 1), step("a", 9)], atomic=True)
    assert outcomes[1] is CommitOutcome.CONFLICT
    assert recorder.seen == [("committed", list(zip(["a", "a"], outcomes, strict=True)))]


def test_a_schedule_fire_reports_the_executions_it_inserted(store: Store) -> None:
    record = ScheduleRecord("s", "wf", {"every": "1m"}, T0, T0)
    assert store.create_schedule(record)
    create(store, "s-1")  # an earlier fire of this tick already started it
    recorder = Recorder()
    store.add_observer(recorder)
    starts = [new("s-1"), new("s-2")]
    assert store.update_schedule(ScheduleWrite(replace(record, version=1), 0, starts))
    assert recorder.seen == [("created", "s-2")]
    # A fire whose compare-and-set fails inserts nothing and reports nothing.
    assert not store.update_schedule(ScheduleWrite(record, 0, [starts[1]]))
    assert recorder.seen == [("created", "s-2")]


def test_a_failing_observer_neither_fails_nor_undoes_the_write(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    recorder = Recorder()
    store.add_observer(Failing())
    store.add_observer(recorder)  # registered after the failing one: still told
    with caplog.at_level(logging.ERROR, logger="wovyr.store"):
        create(store, "a")
        assert store.commit([step("a", 1)]) == [CommitOutcome.OK]
        [claim] = store.claim(ClaimAsk("w", T0 + timedelta(seconds=1), 30, 10))
    assert claim.execution_id == "a"
    record = store.load("a", "default")
    assert record is not None and record.seq == 2 and record.lease_owner == "w"
    assert [kind for kind, _ in recorder.seen] == ["created", "committed", "claimed"]
    broke = [r.getMessage() for r in caplog.records if r.name == "wovyr.store"]
    assert len(broke) == 3 and all("observer" in m for m in broke)
