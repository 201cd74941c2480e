"""Concurrency keys across worker processes (`wovyr worker`, real processes) on a SQLite
file and on PostgreSQL: 20 executions share a key with `limit: 2`, three workers drive
them; inside the activity no more than 2 ever run at once, all complete, and the slots go
in start order. A holder's worker killed (SIGKILL): the slot stays with its execution and
is used again once the lease expires (the execution resumes on another worker); nobody
else runs meanwhile."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Collection, Iterator
from pathlib import Path

import pytest

from wovyr.engine.engine import Engine
from wovyr.engine.flow import MAX_GRANT_AGE
from wovyr.store import open_store

TOOLS = Path(__file__).with_name("flow_tools.py")
FLOW = textwrap.dedent("""
    apiVersion: wovyr/v1
    kind: Workflow
    metadata: {{name: serial}}
    inputs:
      customer: {{type: string, required: true}}
      first: {{type: number, default: 0}}
    concurrency: {{key: "cust-${{{{ inputs.customer }}}}", limit: {limit}}}
    activities:
      - id: work
        tool: flow.hold
        with: {{seconds: 0.1, first: "${{{{ inputs.first }}}}"}}
        retry: {{max_attempts: 5, initial_interval: 0}}
    """)


class Workers:
    """`wovyr worker` processes over one store, with the activity log they share."""

    def __init__(self, url: str, folder: Path) -> None:
        self.url, self.folder = url, folder
        self.log = folder / "activity.log"
        self.procs: list[subprocess.Popen[bytes]] = []

    def spawn(self, *args: str) -> subprocess.Popen[bytes]:
        code = "import sys; from wovyr.cli.main import main; sys.exit(main())"
        cmd = [sys.executable, "-c", code, "worker", "--db", self.url, "-a", str(TOOLS), *args]
        env = {
            **os.environ,
            "WOVYR_FLOW_LOG": str(self.log),
            "WOVYR_HOME": str(self.folder / "home"),
        }
        with (self.folder / f"worker-{len(self.procs)}.log").open("ab") as out:
            proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT)
        self.procs.append(proc)
        return proc

    def ready(self, seconds: float = 60) -> None:
        """Until every worker spawned has printed its start-up line (it claims from then on):
        a test that needs them all to take work starts it after this."""

        def started(i: int) -> bool:
            out = self.folder / f"worker-{i}.log"
            return out.exists() and any(
                line.startswith("worker ") for line in out.read_text().splitlines()
            )

        wait_for(lambda: all(started(i) for i in range(len(self.procs))), seconds, "workers")

    def records(self) -> list[tuple[str, str, int, int]]:
        """(enter|exit, execution, attempt, pid) in the order they were written."""
        if not self.log.exists():
            return []
        out = []
        for line in self.log.read_text().splitlines():
            what, execution, attempt, pid, _ = line.split()
            out.append((what, execution, int(attempt), int(pid)))
        return out

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def wait_for(check: Callable[[], bool], seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {seconds}s waiting for {what}")
        time.sleep(0.05)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "postgres":
        return str(request.getfixturevalue("migrated_postgres_url"))
    return f"sqlite:///{tmp_path / 'wovyr.db'}"


@pytest.fixture
def workers(store_url: str, tmp_path: Path) -> Iterator[Workers]:
    group = Workers(store_url, tmp_path)
    try:
        yield group
    finally:
        group.stop()


def most_at_once(records: list[tuple[str, str, int, int]], dead: Collection[int] = ()) -> int:
    """The most attempts inside the activity at once; an attempt of a killed process (in
    `dead`) ends where its process died: at the next record of another process."""
    inside: set[tuple[str, int, int]] = set()
    most = 0
    for what, execution, attempt, pid in records:
        inside = {a for a in inside if a[2] not in dead or a[2] == pid}
        if what == "enter":
            inside.add((execution, attempt, pid))
            most = max(most, len(inside))
        else:
            inside.discard((execution, attempt, pid))
    return most


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_three_workers_never_run_more_than_the_limit_and_keep_start_order(
    workers: Workers,
) -> None:
    engine = Engine(open_store(workers.url))
    limit, count = 2, 20
    try:
        ids = [f"job-{i:02}" for i in range(count)]
        for execution_id in ids:
            engine.start(FLOW.format(limit=limit), {"customer": "c1"}, execution_id=execution_id)
        state = engine.store.slot_state(engine.tenant, "cust-c1")
        assert state.holders == ids[:limit] and state.waiting == ids[limit:]
        # One slot each: two of them hold the key's slots, the third would run a third
        # execution if the store let it.
        for _ in range(3):
            workers.spawn("--poll-interval", "0.05", "--lease-seconds", "10", "--concurrency", "1")
        done = lambda: all(engine.get(i).status == "completed" for i in ids)  # noqa: E731
        wait_for(done, 90, "all executions to complete")
    finally:
        engine.close()
    records = workers.records()
    enters = [r for r in records if r[0] == "enter"]
    assert sorted(r[1] for r in enters) == ids  # each ran once
    assert most_at_once(records) <= limit
    assert len({r[3] for r in enters}) >= 2  # the work really was spread over processes
    # Slots go in start order: job i enters only once i + 1 - limit earlier jobs exited.
    position = {execution_id: i for i, execution_id in enumerate(ids)}
    exited: set[str] = set()
    for what, execution, _, _ in records:
        if what == "exit":
            exited.add(execution)
            continue
        i = position[execution]
        assert sum(1 for e in exited if position[e] < i) >= i + 1 - limit, (execution, exited)


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_a_killed_holders_slot_is_used_again_after_its_lease_expires(workers: Workers) -> None:
    engine = Engine(open_store(workers.url))
    lease = 3.0
    try:
        engine.start(FLOW.format(limit=1), {"customer": "k", "first": 60}, execution_id="first")
        for i in range(2):
            engine.start(FLOW.format(limit=1), {"customer": "k"}, execution_id=f"next-{i}")
        victim = workers.spawn("--poll-interval", "0.05", "--lease-seconds", str(lease))
        wait_for(lambda: len(workers.records()) == 1, 30, "the first attempt to enter")
        assert workers.records()[0][:3] == ("enter", "first", 1)
        victim.send_signal(signal.SIGKILL)
        victim.wait()
        # The killed worker's lease still holds the execution, and the slot stays its.
        state = engine.store.slot_state(engine.tenant, "cust-k")
        assert state.holders == ["first"] and state.waiting == ["next-0", "next-1"]
        # A second worker: the holder resumes there once its lease expires (attempt 2, a
        # short one), then the others get the slot one at a time, in start order.
        workers.spawn("--poll-interval", "0.05", "--lease-seconds", str(lease))
        names = ["first", "next-0", "next-1"]
        done = lambda: all(engine.get(n).status == "completed" for n in names)  # noqa: E731
        wait_for(done, 60, "every execution to complete")
        assert engine.get("first").fence >= 2  # claimed again after the kill
    finally:
        engine.close()
    records = workers.records()
    assert most_at_once(records, dead={victim.pid}) <= 1
    enters = [r[1] for r in records if r[0] == "enter"]
    assert enters == ["first", "first", "next-0", "next-1"]
    assert records[0][3] == victim.pid and records[1][3] != victim.pid


RATED = textwrap.dedent("""
    apiVersion: wovyr/v1
    kind: Workflow
    metadata: {name: rated}
    activities:
      - id: call
        tool: flow.hold
        with: {seconds: 0}
        rate_limit: {key: api, limit: 10, per: 1s, burst: 3}
    """)


def enter_times(workers: Workers) -> list[float]:
    return sorted(
        float(line.split()[4])
        for line in workers.log.read_text().splitlines()
        if line.startswith("enter ")
    )


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_a_rate_limit_holds_across_three_workers(workers: Workers) -> None:
    """10/s with a burst of 3: every 1 s window sees at most 10 x 1.2 + 3 calls (the
    bucket's capacity is the burst; a call starts within MAX_GRANT_AGE of its units), and
    over a bounded count the rate is within 10 % of 10/s."""
    count = 50
    engine = Engine(open_store(workers.url))
    try:
        for _ in range(3):
            workers.spawn("--poll-interval", "0.02", "--lease-seconds", "10")
        ids = [engine.start(RATED, {}, execution_id=f"r-{i:02}").id for i in range(count)]
        done = lambda: all(engine.get(i).status == "completed" for i in ids)  # noqa: E731
        wait_for(done, 90, "every call")
        attempts = [engine.query(i).activities["call"]["attempt"] for i in ids]
    finally:
        engine.close()
    assert attempts == [1] * count  # waiting for units is not a retry
    times = enter_times(workers)
    assert len(times) == count
    busiest = max(sum(1 for t in times if start <= t < start + 1.0) for start in times)
    assert busiest <= 10 * (1 + MAX_GRANT_AGE) + 3, busiest
    rate = (count - 1) / (times[-1] - times[0])
    print(f"rate limit 10/s over 3 workers: {rate:.2f} calls/s, busiest 1 s window {busiest}")
    assert 9.0 <= rate <= 11.0, rate
