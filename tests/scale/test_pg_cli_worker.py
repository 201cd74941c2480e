"""`wovyr worker` on PostgreSQL, as a real process: LISTEN/NOTIFY pickup latency with a slow
poll, and `--partitions/--of` claiming only its partitions."""

from __future__ import annotations

import statistics
import time
from datetime import datetime
from typing import TYPE_CHECKING

import pytest

from wovyr.store.shards import stable_shard

if TYPE_CHECKING:
    from conftest import Cluster  # tests/scale/conftest.py (the `cluster` fixture)

pytestmark = pytest.mark.postgres


def _pickup_seconds(cluster: Cluster, execution_id: str) -> float:
    """ExecutionStarted (the starter's clock) -> ActivityStarted (the worker's, right after
    its claim): both from this machine's clock."""
    engine = cluster.engine()
    try:
        history = engine.history(execution_id)
    finally:
        engine.close()
    at: dict[str, datetime] = {}
    for event in history:
        at.setdefault(event.type, event.at)
    return (at["ActivityStarted"] - at["ExecutionStarted"]).total_seconds()


@pytest.mark.timeout(60)
def test_idle_worker_picks_work_up_at_once_whatever_the_poll_interval(cluster: Cluster) -> None:
    # No poll falls within the test: only a notification can wake the worker for each start.
    proc = cluster.spawn_cli("--poll-interval", "600", "--lease-seconds", "10", name="cli")
    source = cluster.chain("latency", 1, tool="scale.noop")
    engine = cluster.engine()
    try:
        engine.register(source)
        warm = engine.start(source, execution_id="warm").id  # the worker is up and idle after
        cluster.wait_for(lambda: engine.query(warm).status == "completed", 30, "the warm-up")
        samples = []
        for i in range(7):
            time.sleep(0.15)  # idle again: waiting on LISTEN, its next poll seconds away
            ex = engine.start(source, execution_id=f"lat-{i}").id
            cluster.wait_for(lambda ex=ex: engine.query(ex).status == "completed", 10, ex)
            samples.append(_pickup_seconds(cluster, ex))
    finally:
        engine.close()
    assert cluster.stop(proc) == 0, cluster.log("cli")
    assert "leases released" in cluster.log("cli")
    p50 = statistics.median(samples)
    print(f"pickup latency, no poll: p50 {p50 * 1000:.1f} ms, max {max(samples) * 1000:.1f}")


@pytest.mark.timeout(60)
def test_cli_worker_claims_only_its_partitions(cluster: Cluster) -> None:
    source = cluster.chain("parts", 1, tool="scale.noop")
    engine = cluster.engine()
    try:
        ids = cluster.start_many(engine, source, 40, "p")
        mine = {i for i in ids if stable_shard(i) % 16 < 8}
        assert 0 < len(mine) < len(ids)
        proc = cluster.spawn_cli("--partitions", "0-7", "--of", "16", name="cli")
        done = lambda: {i for i in ids if engine.query(i).status == "completed"}  # noqa: E731
        cluster.wait_for(lambda: done() == mine, 30, "its partitions to complete")
        # Every execution existed before the worker started, and 40 is below its capacity,
        # so its first claim took all it was allowed to: a claim of another partition would
        # show as a fence above 0 now, with no need to wait for it to run.
        others = [engine.get(i) for i in set(ids) - mine]
        assert all(r.lease_owner is None and r.fence == 0 for r in others)
    finally:
        engine.close()
    assert cluster.stop(proc) == 0, cluster.log("cli")
    assert "partitions 0-7 of 16" in cluster.log("cli")
    # Alone, it is told (and says on stderr) that the other half of the queue has no worker.
    assert "ERROR wovyr.worker: worker " in cluster.log("cli")
    assert "partitions 8-15 of 16 have no live worker" in cluster.log("cli")
