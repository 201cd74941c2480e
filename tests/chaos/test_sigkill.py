"""Crash safety: workers SIGKILLed at seeded random moments, restarted until all complete.

Invariants checked from the durable history and the side-effect log:
- every execution completes; each step's result is recorded exactly once;
- each step ran its side effect once per attempt at most (never twice in one attempt);
- side effects of a step = 1 + the kills that hit inside that step (attempts lost with
  their worker after the effect was written), and the completing attempt is one of them.
"""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import textwrap
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from wovyr.engine.engine import Engine
from wovyr.store.sqlite import SQLiteStore

FIVE_STEPS = textwrap.dedent("""
    apiVersion: wovyr/v1
    kind: Workflow
    metadata: {name: crashy}
    activities:
    """) + "".join(
    f"  - {{id: s{i}, tool: effect, with: {{step: s{i}}}, needs: {needs}, "
    "retry: {max_attempts: 100, initial_interval: 0}}\n"
    for i, needs in enumerate(["[]", "[s1]", "[s2]", "[s3]", "[s4]"], start=1)
)
WORKER = Path(__file__).with_name("crash_worker.py")
LEASE = 0.4


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_sigkill_at_random_points_loses_nothing(tmp_path: Path) -> None:
    rng = random.Random(20261129)
    db, effects = tmp_path / "w.db", tmp_path / "effects.log"
    engine = Engine(SQLiteStore(db))
    ids = [engine.start(FIVE_STEPS, execution_id=f"ex-{i}").id for i in range(12)]
    kills = 0
    while kills < 50:
        proc = subprocess.Popen([sys.executable, str(WORKER), str(db), str(effects), str(LEASE)])
        try:
            proc.wait(timeout=rng.uniform(0.25, 0.9))  # the kill moment, drawn from the seed
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            kills += 1
        if all(engine.query(i).status == "completed" for i in ids):
            ids += [
                engine.start(FIVE_STEPS, execution_id=f"ex-{len(ids) + n}").id for n in range(6)
            ]
    final = subprocess.run(
        [sys.executable, str(WORKER), str(db), str(effects), str(LEASE)], timeout=300, check=True
    )
    assert final.returncode == 0

    lines = [ln.split() for ln in effects.read_text().splitlines() if ln.strip()]
    per_attempt = Counter((ex, step, int(att)) for ex, step, att in lines)
    assert max(per_attempt.values()) == 1, "an attempt ran its side effect twice"
    effect_attempts: dict[tuple[str, str], set[int]] = defaultdict(set)
    for ex, step, att in per_attempt:
        effect_attempts[(ex, step)].add(att)

    inside_kills = 0
    for ex in ids:
        view = engine.query(ex)
        assert view.status == "completed", (ex, view.status)
        history = engine.history(ex)
        for step in ("s1", "s2", "s3", "s4", "s5"):
            done = [
                e for e in history if e.type == "ActivityCompleted" and e.data["activity"] == step
            ]
            assert len(done) == 1, (ex, step, "result recorded more than once")
            lost = {
                e.data["attempt"]
                for e in history
                if e.type == "ActivityFailed"
                and e.data["activity"] == step
                and e.data["error"]["type"] == "WorkerLost"
            }
            effects_seen = effect_attempts[(ex, step)]
            assert done[0].data["attempt"] in effects_seen
            killed_inside = effects_seen - {done[0].data["attempt"]}
            assert killed_inside <= lost, "a side effect without a recorded lost attempt"
            inside_kills += len(killed_inside)
    engine.close()
    assert kills >= 50
    print(f"kills={kills} executions={len(ids)} kills inside a step={inside_kills}")
