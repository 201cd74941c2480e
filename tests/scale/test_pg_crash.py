"""Crash: a worker SIGKILLed in the middle of a step (and of a load). Another worker takes
over once the leases expire and completes everything.

Invariants (`Cluster.check_invariants`), as in the SQLite SIGKILL test: every execution
completes; each step's result is recorded exactly once; no attempt ran its side effect
twice; every other attempt that left an effect is recorded as lost with its worker.
"""

from __future__ import annotations

import signal
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from conftest import Cluster  # tests/scale/conftest.py (the `cluster` fixture)

pytestmark = pytest.mark.postgres

GATED = """
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: gated}
activities:
  - {id: s1, tool: scale.gate, with: {step: s1}, retry: {max_attempts: 100, initial_interval: 0}}
  - {id: s2, tool: scale.effect, with: {step: s2}, needs: [s1],
     retry: {max_attempts: 100, initial_interval: 0}}
"""


@pytest.mark.timeout(90)
def test_sigkill_mid_step_another_worker_reclaims_and_completes(cluster: Cluster) -> None:
    engine = cluster.engine()
    try:
        [gated] = cluster.start_many(engine, GATED, 1, "gated")
        ids = [gated, *cluster.start_many(engine, cluster.chain("load", 3), 40, "load")]
        a = cluster.spawn("--lease", "1.5", "--concurrency", "16", name="a")
        cluster.wait_for(lambda: len(cluster.lines("entered")) == 1, 20, "A inside the step")
        a.send_signal(signal.SIGKILL)  # mid-step; other executions mid-flight too
        assert a.wait(10) == -signal.SIGKILL
        (cluster.folder / "marker").touch()

        b = cluster.spawn("--lease", "10", "--poll", "0.5", name="b")
        cluster.wait_all_finished(len(ids), 60)
        assert cluster.stop(b) == 0, cluster.log("b")

        lost = cluster.check_invariants(engine, ids)
        assert lost >= 1  # at least the gated step's attempt died with A
        history = engine.history(gated)
        s1 = [
            (e.type, e.data.get("attempt"), e.data.get("recovery"))
            for e in history
            if e.data.get("activity") == "s1" and e.data.get("attempt") is not None
        ]
        assert s1 == [
            ("ActivityStarted", 1, None),
            ("ActivityStarted", 1, 1),  # recorded by B, durably, before it ran attempt 1 again
            ("ActivityCompleted", 1, None),
        ]
        entered = sorted((attempt, pid) for _, _, attempt, pid in cluster.lines("entered"))
        assert entered == sorted([(1, a.pid), (1, b.pid)])
    finally:
        engine.close()
