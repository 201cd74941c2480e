"""An activity `timeout` on a child workflow is enforced durably: the child's start arms a
timer; when it fires first, the attempt fails with `Timeout` (its retry policy applies) and
the child is cancelled in the same transaction; when the child ends first, the timer is
cancelled."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from typing import Any

from wovyr.clock import ManualClock
from wovyr.engine.engine import Engine
from wovyr.errors import StoreUnavailable
from wovyr.store.base import CommitOutcome, StepWrite
from wovyr.store.sqlite import SQLiteStore
from wovyr.testing import drain


def wf(name: str, body: str) -> str:
    head = f"apiVersion: wovyr/v1\nkind: Workflow\nmetadata: {{name: {name}}}\n"
    return head + textwrap.dedent(body)


FOREVER = wf(
    "forever",
    """
    activities:
      - id: hold
        wait: {signal: go}
    output: "${{ activities.hold.output }}"
    """,
)
PARENT = wf(
    "parent",
    """
    activities:
      - id: c
        workflow: {name: forever}
        timeout: 3s
    output: "${{ activities.c.output }}"
    """,
)


def types(engine: Engine, execution_id: str) -> list[str]:
    return [e.type for e in engine.history(execution_id)]


def test_a_child_that_outlives_its_timeout_is_cancelled_and_the_activity_times_out(
    engine: Engine, clock: ManualClock
) -> None:
    engine.apply(FOREVER)
    parent = engine.start(PARENT).id
    child = f"{parent}::c"
    drain(engine)
    assert engine.query(child).status == "waiting"
    armed = [e.data for e in engine.history(parent) if e.type == "TimerArmed"]
    assert armed == [
        {
            "timer": "c:child-timeout:1",
            "activity": "c",
            "item": None,
            "attempt": 1,
            "purpose": "child_timeout",
            "fire_at": "2030-01-01T09:00:03+00:00",
        }
    ]
    clock.advance(2.9)
    drain(engine)
    assert engine.query(parent).activities["c"]["status"] == "waiting"
    clock.advance(0.2)  # 3.1 s after the child started
    drain(engine)
    view = engine.query(parent)
    assert view.status == "failed"
    error = view.activities["c"]["error"]
    assert error["type"] == "Timeout"
    assert error["details"] == {"child": child, "timeout": 3.0}
    assert child in error["message"] and "3.0s" in error["message"]
    assert engine.query(child).status == "cancelled"
    cancelled = [e.data for e in engine.history(child) if e.type == "ExecutionCancelled"]
    assert cancelled == [
        {"reason": f"the activity that started it in {parent} timed out", "by": parent}
    ]
    assert engine.store.next_timer_at() is None


def test_a_child_that_ends_first_cancels_the_timer(engine: Engine, clock: ManualClock) -> None:
    engine.apply(FOREVER)
    parent = engine.start(PARENT).id
    drain(engine)
    clock.advance(2)
    engine.signal(f"{parent}::c", "go", {"ok": 1})
    drain(engine)
    view = engine.query(parent)
    assert view.status == "completed", view.error
    assert view.output == {"ok": 1}
    history = engine.history(parent)
    assert [e.data for e in history if e.type == "TimerCancelled"] == [
        {"timer": "c:child-timeout:1"}
    ]
    assert engine.store.next_timer_at() is None
    clock.advance(10)
    drain(engine)
    assert "TimerFired" not in types(engine, parent)


def test_a_timed_out_child_is_retried_under_the_activitys_retry_policy(
    engine: Engine, clock: ManualClock
) -> None:
    engine.apply(FOREVER)
    parent = engine.start(
        wf(
            "retrying",
            """
            activities:
              - id: c
                workflow: {name: forever}
                timeout: 3s
                retry: {max_attempts: 2, initial_interval: 0s}
            output: "${{ activities.c.output }}"
            """,
        )
    ).id
    drain(engine)
    clock.advance(4)
    drain(engine)
    first, second = f"{parent}::c", f"{parent}::c~2"
    assert engine.query(first).status == "cancelled"
    assert engine.query(second).status == "waiting"
    failed = [e.data for e in engine.history(parent) if e.type == "ActivityFailed"]
    assert [(d["attempt"], d["error"]["type"], d["will_retry"]) for d in failed] == [
        (1, "Timeout", True)
    ]
    engine.signal(second, "go", "late but in time")
    drain(engine)
    view = engine.query(parent)
    assert view.status == "completed" and view.output == "late but in time"


def test_each_item_child_has_its_own_timeout(engine: Engine, clock: ManualClock) -> None:
    engine.apply(FOREVER)
    parent = engine.start(
        wf(
            "fan",
            """
            activities:
              - id: each
                for_each: "${{ [1, 2] }}"
                workflow: {name: forever}
                timeout: 3s
            """,
        )
    ).id
    drain(engine)
    engine.signal(f"{parent}::each[0]", "go", 1)
    drain(engine)
    clock.advance(4)
    drain(engine)
    view = engine.query(parent)
    assert view.status == "failed"
    items = view.activities["each"]["items"]
    assert items[0]["status"] == "completed"
    assert items[1]["status"] == "failed" and items[1]["error"]["type"] == "Timeout"
    assert engine.query(f"{parent}::each[0]").status == "completed"
    assert engine.query(f"{parent}::each[1]").status == "cancelled"
    history = engine.history(parent)
    assert [e.data["timer"] for e in history if e.type == "TimerCancelled"] == [
        "each[0]:child-timeout:1"
    ]
    assert [e.data["timer"] for e in history if e.type == "TimerFired"] == [
        "each[1]:child-timeout:1"
    ]


class DiesOnCancel(SQLiteStore):
    """The commit that cancels a child fails once, before anything is written (a crash)."""

    def __init__(self) -> None:
        super().__init__()
        self.failed = 0

    def commit(self, steps: Sequence[StepWrite], atomic: bool = False) -> list[CommitOutcome]:
        cancels = [e for s in steps for e in s.events if e.type == "ExecutionCancelled"]
        if cancels and not self.failed:
            self.failed += 1
            raise StoreUnavailable("the connection died before the write")
        return super().commit(steps, atomic)


def test_the_timeout_and_the_childs_cancel_are_one_transaction(clock: ManualClock) -> None:
    store = DiesOnCancel()
    engine = Engine(store, clock=clock)
    engine.apply(FOREVER)
    parent = engine.start(PARENT).id
    drain(engine)
    clock.advance(4)
    drain(engine)  # the commit fails: neither the timeout nor the cancel is written; resumed
    assert store.failed == 1
    assert engine.query(parent).status == "failed"
    assert engine.query(f"{parent}::c").status == "cancelled"
    fails: list[Any] = [e for e in engine.history(parent) if e.type == "ActivityFailed"]
    assert len(fails) == 1
