"""Contention: four worker processes over 2,000 three-step executions on one database.

Every execution completes and every step's side effect is recorded exactly once (the
side-effect count equals the distinct count, and equals executions x steps), with the work
really shared between the processes. A lighter variant (two processes, membership) runs in
the fast suite.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import TYPE_CHECKING

import psycopg
import pytest

from wovyr.store.shards import stable_shard

if TYPE_CHECKING:
    from conftest import Cluster  # tests/scale/conftest.py (the `cluster` fixture)

pytestmark = pytest.mark.postgres


def run_load(cluster: Cluster, count: int, workers: int, *extra: str) -> None:
    source = cluster.chain("contended", 3)
    engine = cluster.engine()
    try:
        ids = cluster.start_many(engine, source, count, "c")
    finally:
        engine.close()
    go = cluster.folder / "go"
    procs = cluster.spawn_many(workers, "--go", str(go), "--lease", "10", *extra, prefix="w")
    go.touch()  # all at once: they contend for the same rows from the first claim
    seen = cluster.wait_all_finished(count, 240)
    assert cluster.stop_all() == [0] * workers, [cluster.log(f"w{n}") for n in range(workers)]
    assert seen == Counter({"completed": count}), seen
    assert all(p.returncode == 0 for p in procs)

    effects = cluster.lines()
    keys = [(ex, step) for ex, step, _, _ in effects]
    assert len(keys) == len(set(keys)) == count * 3, "a step's side effect ran twice or never"
    assert {ex for ex, _ in keys} == set(ids)
    assert all(attempt == 1 for _, _, attempt, _ in effects)
    by_pid = Counter(pid for _, _, _, pid in effects)
    assert len(by_pid) == workers, by_pid  # the work was really shared


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_four_processes_over_2000_three_step_executions(cluster: Cluster) -> None:
    run_load(cluster, 2000, 4)


@pytest.mark.timeout(60)
def test_two_members_split_the_partitions_and_share_a_load(cluster: Cluster) -> None:
    args = ("--membership", "--of", "8", "--lease", "10", "--heartbeat", "0.2")
    procs = cluster.spawn_many(2, *args, prefix="m")

    def members() -> int:
        with psycopg.connect(cluster.url, autocommit=True) as conn:
            row = conn.execute("SELECT count(*) FROM worker_members").fetchone()
        return int(row[0]) if row else 0

    def share(name: str) -> int:
        """How many partitions the worker's last rebalance gave it (0: none logged yet)."""
        found = re.findall(r"partitions \[([\d, ]*)\] of 8", cluster.log(name))
        return len(found[-1].split(",")) if found and found[-1] else 0

    cluster.wait_for(lambda: members() == 2, 20, "both workers to join")
    # Half each means each one's view holds both members: the shares no longer overlap.
    cluster.wait_for(lambda: share("m0") == share("m1") == 4, 20, "both to hold half")
    source = cluster.chain("shared", 3)
    engine = cluster.engine()
    try:
        ids = cluster.start_many(engine, source, 80, "m")
    finally:
        engine.close()
    assert cluster.wait_all_finished(len(ids), 60) == Counter({"completed": len(ids)})
    assert [cluster.stop(p) for p in procs] == [0, 0]
    assert members() == 0  # both left on shutdown
    effects = cluster.lines()
    keys = [(ex, step) for ex, step, _, _ in effects]
    assert len(keys) == len(set(keys)) == len(ids) * 3
    # Membership split the partitions: each execution ran wholly in the process owning it.
    pid_of: dict[str, set[int]] = {}
    for ex, _, _, pid in effects:
        pid_of.setdefault(ex, set()).add(pid)
    assert all(len(pids) == 1 for pids in pid_of.values())
    halves: dict[bool, set[int]] = {True: set(), False: set()}
    for ex, pids in pid_of.items():
        halves[stable_shard(ex) % 8 < 4] |= pids
    assert len(halves[True]) == len(halves[False]) == 1 and halves[True] != halves[False]
