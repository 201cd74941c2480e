"""A stalled worker: A claims and runs a step, is SIGSTOPped past its lease; B takes the
execution over and finishes it; A is continued, finishes its step and tries to commit: the
store refuses (LEASE_LOST) and the result is recorded exactly once, B's.

A runs with a heartbeat far longer than the test, so after SIGCONT its first act is the
commit (not a heartbeat noticing the loss first), and with a 60 s poll, so it never claims
anything again by itself.
"""

from __future__ import annotations

import json
import signal
from typing import TYPE_CHECKING

import psycopg
import pytest

if TYPE_CHECKING:
    from conftest import Cluster  # tests/scale/conftest.py (the `cluster` fixture)

pytestmark = pytest.mark.postgres


@pytest.mark.timeout(90)
def test_a_stalled_worker_commits_nothing_after_a_takeover(cluster: Cluster) -> None:
    source = cluster.chain("stalled", 1, tool="scale.gate")
    engine = cluster.engine()
    try:
        [ex] = cluster.start_many(engine, source, 1, "stall")
        report = cluster.folder / "a.json"
        a = cluster.spawn(
            "--lease", "1", "--heartbeat", "600", "--poll", "60", "--report", str(report),
            name="a",
        )  # fmt: skip
        cluster.wait_for(lambda: len(cluster.lines("entered")) == 1, 20, "A to enter the step")
        a.send_signal(signal.SIGSTOP)
        a_pid = cluster.lines("entered")[0][3]
        assert a_pid == a.pid

        def lease_expired() -> bool:  # by the database's clock, which leases are measured on
            with psycopg.connect(cluster.url, autocommit=True) as conn:
                row = conn.execute(
                    "SELECT lease_until < now() FROM executions WHERE id = %s", (ex,)
                ).fetchone()
            return bool(row and row[0])

        cluster.wait_for(lease_expired, 20, "A's lease (1 s) to run out while A is frozen")

        b = cluster.spawn("--lease", "10", name="b")
        cluster.wait_for(lambda: len(cluster.lines("entered")) == 2, 20, "B to take over")
        (cluster.folder / "marker").touch()  # the step may finish now
        cluster.wait_for(lambda: engine.query(ex).status == "completed", 20, "B to finish")
        events_before = len(engine.history(ex))

        a.send_signal(signal.SIGCONT)  # A finishes its step and tries to commit its result
        cluster.wait_for(lambda: len(cluster.lines()) == 2, 20, "A's side effect")
        # Stopping lets A's in-flight step finish (5 s grace): its commit is tried, refused
        # and reported before the process exits.
        assert cluster.stop(a) == 0, cluster.log("a")
        assert cluster.stop(b) == 0, cluster.log("b")

        refused = json.loads(report.read_text())
        assert refused["lease_lost"] == [ex], refused  # A's commit was refused by its fence
        history = engine.history(ex)
        assert len(history) == events_before  # A wrote nothing, not even an event
        completed = [e for e in history if e.type == "ActivityCompleted"]
        assert len(completed) == 1 and completed[0].data["attempt"] == 1
        assert engine.query(ex).activities["s1"]["output"] == b.pid
        assert not [e for e in history if e.type == "ActivityFailed"]  # a loss is no failure
        again = [e.data for e in history if e.type == "ActivityStarted" and "recovery" in e.data]
        assert [(d["attempt"], d["recovery"]) for d in again] == [(1, 1)]  # B re-ran attempt 1
        effects = sorted((attempt, pid) for _, _, attempt, pid in cluster.lines())
        assert effects == sorted([(1, a.pid), (1, b.pid)])  # A's effect ran, its result not kept
    finally:
        engine.close()
