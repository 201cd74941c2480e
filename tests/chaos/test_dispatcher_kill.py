"""Schedules under SIGKILL: a dispatcher killed mid-fire, restarted, never starts a tick twice
and never loses one: fired + skipped + missed always equals the ticks that came due."""

from __future__ import annotations

import contextlib
import random
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from wovyr.engine.engine import Engine
from wovyr.scheduling.schedules import Schedules, spec_of
from wovyr.store.sqlite import SQLiteStore

QUICK = """
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: tick}
activities:
  - {id: x, set: {ok: true}}
"""
DISPATCHER = Path(__file__).with_name("dispatcher.py")


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_killed_dispatchers_start_each_tick_exactly_once(tmp_path: Path) -> None:
    rng = random.Random(42)
    db = tmp_path / "w.db"
    engine = Engine(SQLiteStore(db), min_schedule_interval=0.05)  # below the 1 s default
    engine.apply(QUICK)
    created = Schedules(engine).create(
        "fast", workflow="tick", every="50ms", overlap="allow_all", catchup_window="1h"
    )
    kills = 0
    for _ in range(15):
        two = [subprocess.Popen([sys.executable, str(DISPATCHER), str(db), "5"]) for _ in range(2)]
        with contextlib.suppress(subprocess.TimeoutExpired):  # the kill moment, from the seed
            two[0].wait(timeout=rng.uniform(0.4, 1.2))
        for proc in two:
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
                kills += 1
            proc.wait()
    subprocess.run([sys.executable, str(DISPATCHER), str(db), "0.01"], check=True, timeout=60)
    record = Schedules(engine).get("fast")
    started = engine.list(workflow="tick", limit=1000).items
    assert kills >= 15
    assert record.fired_count == len(started) > 20
    assert len({e.id for e in started}) == len(started)
    assert record.next_fire_at is not None and created.next_fire_at is not None
    due = spec_of(record).ticks_between(created.next_fire_at, record.next_fire_at, limit=100_000)
    came_due = len(due)  # ticks in (first, next]: first tick counted, next not yet due
    assert record.fired_count + record.skipped_count + record.missed_count == came_due
    for execution in started:
        history = engine.history(execution.id)
        assert history[0].data["schedule"] == "fast"
    engine.close()
