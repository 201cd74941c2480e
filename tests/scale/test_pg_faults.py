"""Database faults during a load: the workers' connections terminated again and again with
`pg_terminate_backend`, and (slow) the PostgreSQL server restarted. The workers stay up,
reconnect, and every execution completes with nothing lost or duplicated
(`Cluster.check_invariants`: each step's result recorded once, every repeated side effect
explained by an attempt recorded as lost).

Only this test's own backends are terminated (they carry an application_name of their own):
other sessions may share the server.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

import psycopg
import pytest

if TYPE_CHECKING:
    from conftest import Cluster  # tests/scale/conftest.py (the `cluster` fixture)

pytestmark = pytest.mark.postgres
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
SERVER_URL = os.environ.get("WOVYR_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")


def terminate(url: str, tag: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
            (tag,),
        ).fetchall()
    return len(rows)


def run_with_faults(cluster: Cluster, count: int, fault: str) -> int:
    tag = f"wovyr-fault-{uuid.uuid4().hex[:8]}"
    engine = cluster.engine()
    try:
        ids = cluster.start_many(engine, cluster.chain("faulty", 3), count, "f")
    finally:
        engine.close()
    args = ("--lease", "5", "--concurrency", "8", "--poll", "0.5")
    procs = cluster.spawn_many(2, *args, prefix="w", url=f"{cluster.url}&application_name={tag}")
    faults = 0
    if fault == "terminate":
        # Start once the workers are connected and working, then hit them until three
        # terminations landed or the work ran out (bounded: at most 60 rounds of 0.1 s).
        cluster.wait_for(lambda: cluster.statuses().get("completed", 0) >= 1, 60, "progress")
        for _ in range(60):
            if faults >= 3 or cluster.statuses().get("completed", 0) >= count:
                break
            faults += 1 if terminate(cluster.url, tag) else 0
            time.sleep(0.1)
    else:
        cluster.wait_for(lambda: cluster.statuses().get("completed", 0) >= 10, 30, "progress")
        restart_server()
        faults = 1
    assert all(p.poll() is None for p in procs), "a worker died of a database fault"
    cluster.wait_all_finished(count, 120)
    assert cluster.stop_all() == [0, 0], [cluster.log(f"w{n}") for n in range(2)]
    engine = cluster.engine()
    try:
        cluster.check_invariants(engine, ids)
    finally:
        engine.close()
    return faults


@pytest.mark.timeout(120)
def test_terminated_connections_during_a_load(cluster: Cluster) -> None:
    faults = run_with_faults(cluster, 600, "terminate")
    assert faults >= 2, "the load ended before the faults could hit it"


# --- restarting the server -----------------------------------------------------------------


def _pg_cluster() -> tuple[str, str] | None:
    """(version, name) of the local cluster from /etc/postgresql/<version>/<name>."""
    root = Path("/etc/postgresql")
    found = sorted(p for p in root.glob("*/*") if (p / "postgresql.conf").exists())
    return (found[0].parent.name, found[0].name) if found else None


def _server_up() -> bool:
    try:
        psycopg.connect(SERVER_URL, connect_timeout=2).close()
        return True
    except psycopg.OperationalError:
        return False


def restart_server() -> None:
    found = _pg_cluster()
    assert found is not None
    version, name = found
    subprocess.run(
        ["pg_ctlcluster", "--skip-systemctl-redirect", version, name, "restart"],
        check=True,
        timeout=120,
        capture_output=True,
    )


def ensure_server_running() -> None:
    """Start the cluster again if it is down (whatever happened to the test)."""
    found = _pg_cluster()
    if found is None:
        return
    deadline = time.monotonic() + 60
    while not _server_up() and time.monotonic() < deadline:
        subprocess.run(
            ["pg_ctlcluster", "--skip-systemctl-redirect", *found, "start"],
            check=False,
            timeout=120,
            capture_output=True,
        )
        time.sleep(1)


@pytest.mark.slow
@pytest.mark.alone  # the restart would break whatever other test uses the server meanwhile
@pytest.mark.timeout(300)
def test_server_restart_during_a_load(cluster: Cluster) -> None:
    if shutil.which("pg_ctlcluster") is None or _pg_cluster() is None or os.geteuid() != 0:
        reason = "restarting PostgreSQL needs pg_ctlcluster, a local cluster and root"
        if IN_CI:
            pytest.fail(reason)
        pytest.skip(reason)
    try:
        run_with_faults(cluster, 400, "restart")
    finally:
        ensure_server_running()
