"""`repeat` end to end on every store: the poll example checks until done with a durable
timer between checks, and a new worker over the same store (a restart between two
iterations) resumes at the next iteration, repeating and skipping none."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from wovyr.activities.base import ActivityRegistry
from wovyr.clock import ManualClock
from wovyr.engine.engine import Engine
from wovyr.testing import drain

EXAMPLE = Path(__file__).parents[2] / "examples" / "poll-until-done.yaml"


def checks(registry: ActivityRegistry, calls: list[int]) -> None:
    def check(job: str, ready_after: int, n: int) -> dict[str, Any]:
        calls.append(n)
        return {"state": "done" if n >= ready_after else "running"}

    registry.register("jobs.check", check)


def test_polls_with_a_durable_timer_until_done(
    engine: Engine, registry: ActivityRegistry, clock: ManualClock
) -> None:
    calls: list[int] = []
    checks(registry, calls)
    record = engine.start(path=EXAMPLE, input={"job": "J-1", "ready_after": 4})
    drain(engine)
    for n in (2, 3, 4):
        view = engine.query(record.id)
        assert view.status == "waiting"
        assert view.waiting_on is not None and f"repeat poll iteration {n} at" in view.waiting_on
        assert view.activities["poll"]["iterations"] == n - 1
        assert view.activities["poll"]["max_iterations"] == 20
        drain(engine)  # the timer is not due: nothing runs
        assert calls == list(range(1, n))
        clock.advance(2)
        drain(engine)
    view = engine.query(record.id)
    assert calls == [1, 2, 3, 4]
    assert (view.status, view.output) == ("completed", "J-1 done after 4 checks")
    history = engine.history(record.id)
    assert sum(e.type == "TimerArmed" for e in history) == 3
    assert sum(e.type == "IterationCompleted" for e in history) == 4


def test_a_new_worker_resumes_between_iterations(
    store: Any, registry: ActivityRegistry, clock: ManualClock
) -> None:
    calls: list[int] = []
    checks(registry, calls)
    first = Engine(store, clock=clock, activities=registry)
    record = first.start(path=EXAMPLE, input={"job": "J-2", "ready_after": 3})
    drain(first)
    clock.advance(2)
    drain(first)  # iterations 1 and 2 ran; the worker "dies" waiting for iteration 3
    assert calls == [1, 2]

    again = Engine(store, clock=clock, activities=registry)  # another process, same store
    clock.advance(2)
    drain(again)
    view = again.query(record.id)
    assert calls == [1, 2, 3]  # iteration 3 ran once; none repeated or skipped
    assert view.status == "completed"
    keys = [e.data["key"] for e in again.history(record.id) if e.type == "ActivityStarted"]
    assert keys == [f"{record.id}/poll/1", f"{record.id}/poll~2/1", f"{record.id}/poll~3/1"]


KID = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: probe}
inputs: {n: {type: integer}}
activities:
  - {id: look, set: {done: "${{ inputs.n >= 3 }}"}}
output: "${{ activities.look.output }}"
"""
PARENT = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: prober}
activities:
  - id: probe
    workflow: {name: probe, input: {n: "${{ iteration }}"}}
    repeat: {until: "${{ output.done }}", max_iterations: 5}
output: "${{ activities.probe.iterations }}"
"""


def test_each_iteration_of_a_child_workflow_is_a_child_of_its_own(engine: Engine) -> None:
    engine.apply(KID)
    record = engine.start(PARENT, execution_id="prober-1")
    for _ in range(4):
        drain(engine)
    view = engine.query(record.id)
    assert (view.status, view.output) == ("completed", 3)
    kids = sorted(k.id for k in engine.list(parent_id=record.id, limit=10).items)
    assert kids == ["prober-1::probe", "prober-1::probe~i2", "prober-1::probe~i3"]


@pytest.mark.usefixtures("fresh_registry")  # `-a` loads into the process's default registry
def test_a_foreground_run_sleeps_through_the_iterations_it_may_wait_for(
    tmp_path: Path, capsys: Any, monkeypatch: Any
) -> None:
    from wovyr.cli.main import main

    monkeypatch.setenv("WOVYR_HOME", str(tmp_path))
    activities = str(EXAMPLE.parent / "activities.py")
    argv = ["run", str(EXAMPLE), "-a", activities, "-i", "job=J-3", "-i", "ready_after=2"]
    assert main([*argv, "--wait-up-to", "0", "--id", "fg"]) == 3  # the 2 s timer: waiting
    assert "next iteration of poll of fg at" in capsys.readouterr().out
    assert main([*argv, "--id", "fg"]) == 0  # within the default 60 s: slept through
    assert "J-3 done after 2 checks" in capsys.readouterr().out


def test_the_stored_checkpoint_stays_the_same_size_over_a_thousand_iterations(
    tmp_path: Path,
) -> None:
    """By bytes, on a real SQLite file: the checkpoint stored at iteration 1,000 is the one
    stored at iteration 10 plus a few digits, and each iteration adds the same events."""
    from wovyr.store.codec import dumps
    from wovyr.store.sqlite import SQLiteStore

    registry = ActivityRegistry()
    engine = Engine(SQLiteStore(tmp_path / "w.db"), clock=ManualClock(), activities=registry)
    seen: dict[int, tuple[int, int]] = {}

    def tick(n: int) -> int:
        if n in (10, 1000):  # as the previous iteration's commit left it
            record = engine.store.load("loop", engine.tenant)
            assert record is not None
            seen[n] = (len(dumps(record.checkpoint)), record.seq)
        return n

    registry.register("tick", tick)
    loop = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: loop}
activities:
  - id: poll
    tool: tick
    with: {n: "${{ iteration }}"}
    repeat: {until: "${{ iteration == 1000 }}", max_iterations: 1000}
"""
    engine.start(loop, execution_id="loop")
    drain(engine)
    assert engine.query("loop").activities["poll"]["iterations"] == 1000
    (early, early_seq), (late, late_seq) = seen[10], seen[1000]
    assert late - early <= 12, seen  # the extra digits of a few numbers, not per iteration
    assert (late_seq - early_seq) == 3 * (1000 - 10)  # three events per iteration
    engine.close()
