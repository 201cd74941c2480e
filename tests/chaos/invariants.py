"""Invariants every crash test checks on the durable record once a crashed run was recovered.

Shared by the SIGKILL test (`test_sigkill.py`) and the crash-point tests
(`tests/reliability/test_crash_points.py`). The side-effect log has one line per attempt of
a step's side effect: ``<execution> <step> <attempt>``.

For each execution, after recovery:

- it completed, its events are numbered 1..seq without a gap, and its checkpoint equals the
  fold of its events;
- each step's result (`ActivityCompleted`) is recorded exactly once;
- every side effect belongs to a durable `ActivityStarted` of its attempt (an attempt is
  recorded before it runs, and again, with `recovery: n`, before it is re-run after its
  worker was lost): an attempt ran its side effect at most as often as it was started;
- the attempt whose result was recorded ran its side effect; every other run of it was
  lost with a killed worker (recorded as a recovery, or as a `WorkerLost` failure by an
  older engine). So the side effects of a step number 1 + the kills that landed inside it.
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
    """What the checks counted, per (execution, step): the attempts lost with a worker, and
    the kills inside the step (runs of its side effect that gave no recorded result)."""

    lost: dict[tuple[str, str], set[int]] = field(default_factory=dict)
    inside: dict[tuple[str, str], int] = field(default_factory=dict)

    @property
    def inside_kills(self) -> int:
        return sum(self.inside.values())

    @property
    def lost_attempts(self) -> int:
        return sum(len(v) for v in self.lost.values())


def read_effects(path: Path) -> Counter[tuple[str, str, int]]:
    """How often each (execution, step, attempt) ran its side effect (more than once only
    when its worker was lost after the side effect and the attempt was re-run)."""
    if not path.exists():
        return Counter()
    lines = [ln.split() for ln in path.read_text().splitlines() if ln.strip()]
    return Counter((ex, step, int(att)) for ex, step, att in lines)


def _plain(value: Any) -> Any:
    """JSON-equal form (tuples become lists, as a store gives them back)."""
    return json.loads(json.dumps(value, sort_keys=True, default=str))


def assert_checkpoint_is_fold(store: ExecutionStore, execution_id: str) -> None:
    """The stored checkpoint is exactly the fold of the stored events (and seq matches)."""
    record = store.load(execution_id, "default")
    assert record is not None, f"{execution_id} is missing"
    history = store.history(execution_id, tenant="default")
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
    for ex in execution_ids:
        record = store.load(ex, "default")
        assert record is not None, f"{ex} is missing"
        assert record.status == "completed", (ex, record.status)
        assert not record.ready and record.lease_owner is None, (ex, "still queued or leased")
        assert_checkpoint_is_fold(store, ex)
        history = store.history(ex, tenant="default")
        for step in steps:
            ours = [e for e in history if e.data.get("activity") == step]
            done = [e for e in ours if e.type == "ActivityCompleted"]
            assert len(done) == 1, (ex, step, f"result recorded {len(done)} times")
            starts = Counter(e.data["attempt"] for e in ours if e.type == "ActivityStarted")
            recovered = [
                e.data["attempt"]
                for e in ours
                if e.type == "ActivityStarted" and "recovery" in e.data
            ]
            failed_lost = [
                e.data["attempt"]
                for e in ours
                if e.type == "ActivityFailed" and e.data["error"]["type"] == "WorkerLost"
            ]
            ran = Counter(
                {
                    att: n
                    for (e_ex, e_step, att), n in effects.items()
                    if (e_ex, e_step) == (ex, step)
                }
            )
            for attempt, runs in ran.items():
                assert runs <= starts[attempt], (
                    ex,
                    step,
                    attempt,
                    f"ran its side effect {runs} times, started {starts[attempt]} times",
                )
            final = done[0].data["attempt"]
            assert ran[final] >= 1, (ex, step, "the recorded result has no side effect")
            inside = ran.total() - 1
            assert inside <= len(recovered) + len(failed_lost), (
                ex,
                step,
                "a side effect of a run not recorded as lost",
            )
            report.lost[(ex, step)] = set(recovered) | set(failed_lost)
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
