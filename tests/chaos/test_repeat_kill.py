"""A worker SIGKILLed while a `repeat` waits between iterations 2 and 3: the next worker
fires the durable timer and the loop resumes at iteration 3, none repeated or skipped."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from wovyr.activities.base import ActivityContext, ActivityRegistry
from wovyr.clock import ManualClock
from wovyr.engine.engine import Engine
from wovyr.store.sqlite import SQLiteStore
from wovyr.testing import drain

WORKER = Path(__file__).with_name("crash_worker.py")
POLL = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: poll}
activities:
  - id: poll
    tool: effect
    with: {step: "${{ 'poll' + string(iteration) }}"}
    repeat: {until: "${{ iteration == 4 }}", every: 1s, max_iterations: 10}
output: "${{ activities.poll.iterations }}"
"""


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_sigkill_between_iterations_resumes_at_the_next(tmp_path: Path) -> None:
    db, effects = tmp_path / "w.db", tmp_path / "effects.log"
    engine = Engine(SQLiteStore(db))
    record = engine.start(POLL, execution_id="ex")
    proc = subprocess.Popen([sys.executable, str(WORKER), str(db), str(effects), "5"])
    try:  # iterations 1 and 2 run in the worker process, a second apart
        deadline = time.monotonic() + 60
        while engine.query(record.id).activities["poll"]["iterations"] < 2:
            assert proc.poll() is None, "the worker process ended early"
            assert time.monotonic() < deadline, "the worker did not run two iterations"
            time.sleep(0.02)
    finally:  # killed while the loop waits a second for iteration 3
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    view = engine.query(record.id)
    assert (view.status, view.activities["poll"]["iterations"]) == ("waiting", 2)

    registry = ActivityRegistry()

    def effect(step: str, ctx: ActivityContext) -> str:
        with effects.open("a") as out:
            out.write(f"{ctx.execution_id} {step} {ctx.attempt}\n")
        return f"{step}-done"

    registry.register("effect", effect)
    clock = ManualClock(datetime.now(UTC))
    after = Engine(SQLiteStore(db), clock=clock, activities=registry)  # the next worker
    for _ in range(2):
        clock.advance(2)  # past the durable timer the killed worker armed
        drain(after)
    view = after.query(record.id)
    assert (view.status, view.output) == ("completed", 4)
    lines = effects.read_text().splitlines()
    assert lines == ["ex poll1 1", "ex poll2 1", "ex poll3 1", "ex poll4 1"]
    engine.close()
    after.close()
