"""Invariants every crash test checks on the durable record once a crashed run was recovered.

Shared by the SIGKILL test (`test_sigkill.py`) and the crash-point tests
(`tests/reliability/test_crash_points.py`). The side-effect log has one line per attempt of
a step's side effect: ``<execution> <step> <attempt>``.

For each execution, after recovery:

- it completed, its events are numbered 1..seq without a gap, and its checkpoint equals the
  fold of its events;
- each step's result (`ActivityCompleted`) is recorded exactly once;
- no attempt ran its side effect twice, and every side effect belongs to an attempt whose
  `ActivityStarted` is durable (an attempt is recorded before it runs);
- the attempt whose result was recorded ran its side effect; every other attempt that ran
  it was lost with a killed worker (a `WorkerLost` failure is recorded for it). So the side
  effects of a step number 1 + the kills that landed inside that step.
"""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from wovyr.engine.core.state import fold, state_to_json
from wovyr.events import Event
from wovyr.store.base import ExecutionStore

__all__ = [
    "CrashReport",
    "assert_checkpoint_is_fold",
    "check_recovered",
    "read_effects",
    "sqlite_integrity",
]


@dataclass
class CrashReport:
    """What the checks counted: attempts lost with a worker, and kills inside a step (lost
    attempts that had already run their side effect), per (execution, step)."""

    lost: dict[tuple[str, str], set[int]] = field(default_factory=dict)
    inside: dict[tuple[str, str], set[int]] = field(default_factory=dict)

    @property
    def inside_kills(self) -> int:
        return sum(len(v) for v in self.inside.values())

    @property
    def lost_attempts(self) -> int:
        return sum(len(v) for v in self.lost.values())


def read_effects(path: Path) -> Counter[tuple[str, str, int]]:
    """How often each (execution, step, attempt) ran its side effect."""
    if not path.exists():
        return Counter()
    lines = [ln.split() for ln in path.read_text().splitlines() if ln.strip()]
    return Counter((ex, step, int(att)) for ex, step, att in lines)


def _plain(value: Any) -> Any:
    """JSON-equal form (tuples become lists, as a store gives them back)."""
    return json.loads(json.dumps(value, sort_keys=True, default=str))


def assert_checkpoint_is_fold(store: ExecutionStore, execution_id: str) -> None:
    """The stored checkpoint is exactly the fold of the stored events (and seq matches)."""
    record = store.load(execution_id, tenant=None)
    assert record is not None, f"{execution_id} is missing"
    history = store.history(execution_id)
    assert [e.seq for e in history] == list(range(1, len(history) + 1)), "a gap in the events"
    assert record.seq == len(history), (execution_id, record.seq, len(history))
    folded = fold((Event(e.type, e.at, e.data) for e in history), id=execution_id)
    assert _plain(state_to_json(folded)) == _plain(record.checkpoint), (
        f"{execution_id}: the checkpoint is not the fold of its events"
    )


def check_recovered(
    store: ExecutionStore,
    execution_ids: Iterable[str],
    steps: Iterable[str],
    effects: Counter[tuple[str, str, int]],
) -> CrashReport:
    """Assert the invariants of the module docstring for every execution; count kills."""
    report = CrashReport()
    steps = list(steps)
    assert not effects or max(effects.values()) == 1, "an attempt ran its side effect twice"
    for ex in execution_ids:
        record = store.load(ex, tenant=None)
        assert record is not None, f"{ex} is missing"
        assert record.status == "completed", (ex, record.status)
        assert not record.ready and record.lease_owner is None, (ex, "still queued or leased")
        assert_checkpoint_is_fold(store, ex)
        history = store.history(ex)
        for step in steps:
            ours = [e for e in history if e.data.get("activity") == step]
            done = [e for e in ours if e.type == "ActivityCompleted"]
            assert len(done) == 1, (ex, step, f"result recorded {len(done)} times")
            started = {e.data["attempt"] for e in ours if e.type == "ActivityStarted"}
            lost = {
                e.data["attempt"]
                for e in ours
                if e.type == "ActivityFailed" and e.data["error"]["type"] == "WorkerLost"
            }
            ran = {att for (e_ex, e_step, att) in effects if (e_ex, e_step) == (ex, step)}
            assert ran <= started, (ex, step, "a side effect ran before its attempt was durable")
            final = done[0].data["attempt"]
            assert final in ran, (ex, step, "the recorded result has no side effect")
            inside = ran - {final}
            assert inside <= lost, (ex, step, "a side effect of an attempt not recorded as lost")
            assert len(ran) == 1 + len(inside)
            report.lost[(ex, step)] = lost
            report.inside[(ex, step)] = inside
    return report


def sqlite_integrity(path: Path) -> None:
    """`PRAGMA integrity_check` says ok (run on a connection of its own)."""
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute("PRAGMA integrity_check").fetchall()
    finally:
        conn.close()
    assert rows == [("ok",)], rows
