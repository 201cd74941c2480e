"""Typed event records: one class per event type, writing exactly the stored JSON.

The tricky part of the contract is a key that is written only sometimes: ABSENT (not
written) and None (written as null) are different stored events."""

from __future__ import annotations

import textwrap
from datetime import UTC, datetime
from typing import Any

import pytest

import wovyr.events as events_module
from wovyr.activities.base import ActivityRegistry
from wovyr.definition import load_definition
from wovyr.engine.core import saga
from wovyr.engine.core.decide import start_events
from wovyr.engine.core.state import fold
from wovyr.engine.engine import Engine
from wovyr.events import (
    ABSENT,
    Absent,
    ActivityCompensated,
    ActivityCompleted,
    ActivityFailed,
    ActivityScheduled,
    ActivityStarted,
    ChildFinished,
    ChildStarted,
    CompensationAttemptFailed,
    CompensationFailed,
    CompensationStepStarted,
    Event,
    EventType,
    ExecutionStarted,
    ItemFailed,
    ItemStarted,
    TimerArmed,
    or_absent,
    typed,
)
from wovyr.testing import drain, memory_engine

NOW = datetime(2030, 1, 1, tzinfo=UTC)


def wf(body: str, name: str = "typed") -> str:
    head = f"apiVersion: wovyr/v1\nkind: Workflow\nmetadata: {{name: {name}}}\n"
    return head + textwrap.dedent(body)


def history(engine: Engine, execution_id: str, kind: str) -> list[dict[str, Any]]:
    return [e.data for e in engine.history(execution_id) if e.type == kind]


def test_all_is_sorted_and_every_event_type_has_one_record_named_after_it() -> None:
    assert events_module.__all__ == sorted(events_module.__all__)
    types = {v for k, v in vars(EventType).items() if k.isupper()}
    records = {
        name: obj
        for name, obj in vars(events_module).items()
        if isinstance(obj, type)
        and issubclass(obj, events_module.EventData)
        and obj is not events_module.EventData
    }
    assert set(records) == types
    for name, cls in records.items():
        assert name == cls.TYPE


def test_a_record_writes_its_fields_in_order_and_leaves_absent_keys_out() -> None:
    event = TimerArmed(timer="t", activity="a", item=None, purpose="retry", fire_at="x").at(NOW)
    assert event == Event(EventType.TIMER_ARMED, NOW, event.data)
    assert list(event.data.items()) == [
        ("timer", "t"),
        ("activity", "a"),
        ("item", None),
        ("purpose", "retry"),
        ("fire_at", "x"),
    ]
    assert TimerArmed(timer="t", purpose="p", fire_at="x").to_data() == {
        "timer": "t",
        "purpose": "p",
        "fire_at": "x",
    }


@pytest.mark.parametrize(
    ("data", "read"),
    [
        ({"timer": "t", "purpose": "p", "fire_at": "x"}, ABSENT),
        ({"timer": "t", "item": None, "purpose": "p", "fire_at": "x"}, None),
        ({"timer": "t", "item": 3, "purpose": "p", "fire_at": "x"}, 3),
    ],
)
def test_reading_back_keeps_a_missing_key_and_a_null_apart(data: dict[str, Any], read: Any) -> None:
    record = TimerArmed.parse(Event(EventType.TIMER_ARMED, NOW, data))
    assert record.item == read
    assert record.to_data() == data


def test_the_terminal_failure_has_no_next_attempt_and_writes_output_only_when_given() -> None:
    err = {"type": "E", "message": "m"}
    assert ActivityFailed.final("a", 2, err).to_data() == {
        "activity": "a",
        "attempt": 2,
        "error": err,
        "will_retry": False,
        "next_attempt_at": None,
    }
    assert ActivityFailed.final("a", 2, err, output=None).to_data()["output"] is None
    assert ActivityFailed.final("a", 2, err, output=[1]).to_data()["output"] == [1]
    retrying = ActivityFailed.retrying("a", 1, err, "2030-01-01T00:00:01+00:00")
    assert retrying.will_retry and retrying.next_attempt_at == "2030-01-01T00:00:01+00:00"
    assert ItemFailed.final("a", 4, 1, err).to_data() == {
        "activity": "a",
        "index": 4,
        "attempt": 1,
        "error": err,
        "will_retry": False,
        "next_attempt_at": None,
    }


def test_index_is_written_only_for_an_item_except_in_child_finished() -> None:
    assert or_absent(None) is ABSENT and or_absent(0) == 0
    err = {"type": "E", "message": "m"}
    variants: list[tuple[int | Absent, list[str]]] = [
        (ABSENT, ["activity"]),
        (0, ["activity", "index"]),
    ]
    for index, keys in variants:
        assert list(CompensationStepStarted(activity="a", index=index, attempt=1).to_data()) == [
            *keys,
            "attempt",
        ]
        assert list(ActivityCompensated(activity="a", index=index, output=None).to_data()) == [
            *keys,
            "output",
        ]
        assert list(
            CompensationAttemptFailed(activity="a", index=index, attempt=1, error=err).to_data()
        ) == [*keys, "attempt", "error"]
        assert list(CompensationFailed(activity="a", index=index, error=err).to_data()) == [
            *keys,
            "error",
        ]
        assert list(ChildStarted(activity="a", index=index, attempt=1, child="c").to_data()) == [
            *keys,
            "attempt",
            "child",
        ]
    finished = ChildFinished(
        activity="a", index=None, attempt=1, child="c", status="completed", output=1, error=None
    )
    assert finished.to_data()["index"] is None


def test_optional_keys_of_scheduled_completed_and_item_started() -> None:
    assert ActivityScheduled(activity="a", input=None).to_data() == {"activity": "a", "input": None}
    assert ActivityScheduled(activity="a", input=[1], items=1).to_data() == {
        "activity": "a",
        "input": [1],
        "items": 1,
    }
    wait = {"kind": "signal", "name": "go"}
    assert ActivityScheduled(activity="a", input=None, wait=wait).to_data()["wait"] == wait
    assert "signal" not in ActivityCompleted(activity="a", attempt=1, output=2).to_data()
    completed = ActivityCompleted(activity="a", attempt=1, output=2, signal="go")
    assert completed.to_data()["signal"] == "go"
    assert "input" not in ItemStarted(activity="a", index=0, attempt=2).to_data()
    assert ItemStarted(activity="a", index=0, attempt=1, input=None).to_data()["input"] is None


def test_execution_started_carries_parent_and_depth_only_for_a_child() -> None:
    definition = load_definition(wf("activities:\n  - id: a\n    set: {v: 1}\n"))
    (plain,) = start_events(definition, "h", {}, NOW)
    assert list(plain.data) == [
        "workflow",
        "version",
        "definition_hash",
        "input",
        "parent_id",
        "timeout",
        "activities",
    ]
    parent = {"id": "p", "activity": "x", "index": None, "attempt": 1}
    (child,) = start_events(
        definition, "h", {}, NOW, parent_id="p", extra={"parent": parent, "depth": 1}
    )
    assert child.data == {**plain.data, "parent_id": "p", "parent": parent, "depth": 1}
    (scheduled,) = start_events(
        definition, "h", {}, NOW, extra={"schedule": "s", "scheduled_at": NOW.isoformat()}
    )
    assert list(scheduled.data)[-2:] == ["schedule", "scheduled_at"]
    assert ExecutionStarted.parse(scheduled).parent is ABSENT
    with pytest.raises(TypeError):
        start_events(definition, "h", {}, NOW, extra={"unknown": 1})


def test_parse_refuses_data_that_does_not_fit_and_typed_refuses_unknown_types() -> None:
    started = ActivityStarted(activity="a", attempt=1, key="k").at(NOW)
    assert typed(started) == ActivityStarted(activity="a", attempt=1, key="k")
    with pytest.raises(ValueError, match="is not a ActivityCompleted"):
        ActivityCompleted.parse(started)
    with pytest.raises(ValueError, match="does not fit"):
        typed(Event(EventType.ACTIVITY_STARTED, NOW, {**started.data, "extra": 1}))
    with pytest.raises(ValueError, match="does not fit"):
        typed(Event(EventType.ACTIVITY_STARTED, NOW, {"activity": "a"}))
    with pytest.raises(ValueError, match="unknown event type 'Nope'"):
        typed(Event("Nope", NOW, {}))


# --- the variants as the engine writes them -----------------------------------------------


def _engine() -> Engine:
    engine = memory_engine(ActivityRegistry())  # not the process's default registry

    @engine.activities.activity("flaky")
    def flaky(v: Any = None) -> Any:
        raise RuntimeError("boom")

    @engine.activities.activity("odd")
    def odd(v: int) -> int:
        if v % 2 == 0:
            raise RuntimeError(f"{v} is even")
        return v

    return engine


def test_the_three_kinds_of_timer_write_different_keys() -> None:
    engine = _engine()
    engine.start(
        wf(
            """
            timeout: 1h
            activities:
              - id: nap
                wait: {timer: {after: 1m}}
              - id: flaky
                needs: [nap]
                tool: flaky
                retry: {max_attempts: 2, initial_interval: 1s}
              - id: each
                needs: [nap]
                for_each: "${{ [1] }}"
                tool: flaky
                retry: {max_attempts: 2, initial_interval: 1s}
            """
        ),
        execution_id="t",
    )
    drain(engine)
    engine.clock.advance(minutes=2)
    drain(engine)
    armed = {d["timer"]: d for d in history(engine, "t", EventType.TIMER_ARMED)}
    assert list(armed["workflow:timeout"]) == ["timer", "purpose", "fire_at"]
    assert list(armed["nap:timer"]) == ["timer", "activity", "purpose", "fire_at"]
    retry = ["timer", "activity", "item", "purpose", "fire_at"]
    assert list(armed["flaky:retry:1"]) == retry and armed["flaky:retry:1"]["item"] is None
    assert list(armed["each[0]:retry:1"]) == retry and armed["each[0]:retry:1"]["item"] == 0


def test_a_failed_for_each_writes_its_items_outputs_and_a_plain_failure_none() -> None:
    engine = _engine()
    engine.start(
        wf(
            """
            activities:
              - id: each
                for_each: "${{ [1, 2] }}"
                tool: odd
                with: {v: "${{ item }}"}
                retry: {max_attempts: 1}
              - id: single
                tool: flaky
                retry: {max_attempts: 1}
            """
        ),
        execution_id="f",
    )
    drain(engine)
    failed = {d["activity"]: d for d in history(engine, "f", EventType.ACTIVITY_FAILED)}
    assert failed["each"]["output"] == [1, None]
    assert "output" not in failed["single"]
    assert all(typed(e).to_data() == e.data for e in engine.history("f"))


def test_an_activity_lost_while_the_workflow_fails_is_written_with_output_null() -> None:
    definition = load_definition(
        wf(
            """
            activities:
              - id: lost
                tool: ok
              - id: bad
                tool: ok
            """
        )
    )
    err = {"type": "E", "message": "m"}
    state = fold(
        [
            *start_events(definition, "h", {}, NOW),
            ActivityScheduled(activity="lost", input={}).at(NOW),
            ActivityStarted(activity="lost", attempt=1, key="x/lost/1").at(NOW),
            ActivityScheduled(activity="bad", input={}).at(NOW),
            ActivityStarted(activity="bad", attempt=1, key="x/bad/1").at(NOW),
            ActivityFailed.final("bad", 1, err).at(NOW),
        ],
        id="x",
    )
    (event,), _ = saga.failing(definition, state, NOW, frozenset())
    assert event.type == EventType.ACTIVITY_FAILED
    assert event.data["activity"] == "lost"
    assert "output" in event.data and event.data["output"] is None


def test_a_recovery_and_a_child_timeouts_attempt_are_written_only_when_given() -> None:
    assert "recovery" not in ActivityStarted(activity="a", attempt=1, key="k").to_data()
    again = ActivityStarted(activity="a", attempt=1, key="k", recovery=2).at(NOW)
    assert list(again.data) == ["activity", "attempt", "key", "recovery"]
    assert typed(again).to_data() == again.data
    assert ItemStarted(activity="a", index=0, attempt=1, recovery=1).to_data()["recovery"] == 1
    assert "recovery" not in CompensationStepStarted(activity="a", attempt=1).to_data()
    step = CompensationStepStarted(activity="a", attempt=1, recovery=3).to_data()
    assert step == {"activity": "a", "attempt": 1, "recovery": 3}
    armed = TimerArmed(
        timer="c:child-timeout:2",
        activity="c",
        item=None,
        attempt=2,
        purpose="child_timeout",
        fire_at="x",
    ).at(NOW)
    assert list(armed.data) == ["timer", "activity", "item", "attempt", "purpose", "fire_at"]
    assert typed(armed).to_data() == armed.data
    assert "attempt" not in TimerArmed(timer="t", purpose="p", fire_at="x").to_data()
