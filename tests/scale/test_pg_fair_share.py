"""Fair share across worker processes on PostgreSQL: tenant A queues 500 slow executions
(`scale.gate`: each holds its slot until the marker file exists, which this test never
creates), then tenant B starts one. Two workers of 4 slots, each capping a tenant at 3:
A holds 6 slots and the claim keeps the other two for other tenants, so B completes while
none of A's 500 has (the bound is a count: zero of A's executions before B's). Its time
is printed and held to a 10x margin (30 s against the ~1-3 s a claim round and a step take
here).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from conftest import Cluster  # tests/scale/conftest.py (the `cluster` fixture)

pytestmark = pytest.mark.postgres

BACKLOG = 500


def test_a_backlog_on_two_workers_leaves_a_slot_for_another_tenant(cluster: Cluster) -> None:
    engine = cluster.engine()
    a, b = engine.for_tenant("a"), engine.for_tenant("b")
    try:
        cluster.start_many(a, cluster.chain("slow", 1, tool="scale.gate"), BACKLOG, "a")
        cluster.spawn_many(2, "--concurrency", "4", "--max-per-tenant", "3", prefix="w")
        # A's executions take every slot the cap leaves them: 3 in each worker.
        cluster.wait_for(lambda: len(cluster.lines("entered")) >= 6, 30, "A to fill its share")
        source = cluster.chain("quick", 1)
        b.register(source)
        began = time.monotonic()
        b.start(source, execution_id="b-1")
        cluster.wait_for(lambda: b.get("b-1").status != "running", 30, "B to complete")
        took = time.monotonic() - began
        print(f"\ntenant B's one execution completed in {took:.2f} s behind A's {BACKLOG}")
        assert b.get("b-1").status == "completed"
        entered = {line[0] for line in cluster.lines("entered")}
        assert len(entered) == 6  # A never held more than its cap of the 8 slots
        assert not [line for line in cluster.lines() if line[0].startswith("a-")]  # none done
        assert cluster.statuses()["running"] == BACKLOG
    finally:
        engine.close()
