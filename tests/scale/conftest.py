"""Scale-out tests on PostgreSQL: worker processes (`pg_worker.py`, or the `wovyr worker`
command) over one fresh schema per test; side effects in per-process files (`tools.py`).

Every wait is bounded in time and every loop in count; the `cluster` fixture kills what it
started (continuing stopped ones first) before the schema is dropped.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
import pytest

from wovyr.engine.engine import Engine
from wovyr.store.postgres import PostgresStore

HERE = Path(__file__).parent
WORKER = HERE / "pg_worker.py"
TOOLS = HERE / "tools.py"


def chain(name: str, steps: int, tool: str = "scale.effect") -> str:
    """A workflow of `steps` sequential calls of `tool`, retried (immediately) up to 100
    times: lost attempts must never exhaust the policy in these tests."""
    lines = [
        f"  - {{id: s{i}, tool: {tool}, with: {{step: s{i}}}, "
        f"needs: [{f's{i - 1}' if i > 1 else ''}], "
        "retry: {max_attempts: 100, initial_interval: 0}}"
        for i in range(1, steps + 1)
    ]
    head = textwrap.dedent(f"""\
        apiVersion: wovyr/v1
        kind: Workflow
        metadata: {{name: {name}}}
        activities:
        """)
    return head + "\n".join(lines) + "\n"


@dataclass
class Cluster:
    url: str
    folder: Path
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    chain = staticmethod(chain)

    @property
    def effects_dir(self) -> Path:
        path = self.folder / "effects"
        path.mkdir(exist_ok=True)
        return path

    def env(self, **extra: str) -> dict[str, str]:
        return {
            **os.environ,
            "WOVYR_SCALE_EFFECTS": str(self.effects_dir),
            "WOVYR_SCALE_MARKER": str(self.folder / "marker"),
            **extra,
        }

    def spawn(
        self, *args: str, name: str, wait_ready: bool = True, url: str | None = None
    ) -> subprocess.Popen[bytes]:
        """Start `pg_worker.py URL ARGS` and wait (up to 30 s) until its store is open."""
        ready = self.folder / f"{name}.ready"
        cmd = [sys.executable, str(WORKER), url or self.url, "--ready", str(ready), *args]
        proc = self._popen(cmd, name)
        if wait_ready:
            self.wait_ready(proc, name)
        return proc

    def spawn_many(
        self, count: int, *args: str, prefix: str, url: str | None = None
    ) -> list[subprocess.Popen[bytes]]:
        """`count` workers started together (their imports overlap), ready when this returns."""
        procs = [
            self.spawn(*args, name=f"{prefix}{n}", wait_ready=False, url=url) for n in range(count)
        ]
        for n, proc in enumerate(procs):
            self.wait_ready(proc, f"{prefix}{n}")
        return procs

    def wait_ready(self, proc: subprocess.Popen[bytes], name: str) -> None:
        ready = self.folder / f"{name}.ready"
        self.wait_for(lambda: ready.exists() or proc.poll() is not None, 30, f"{name} to start")
        assert proc.poll() is None, self.log(name)

    def spawn_cli(self, *args: str, name: str) -> subprocess.Popen[bytes]:
        """Start `wovyr worker --db URL --activities tools.py ARGS` (the real command)."""
        code = "import sys; from wovyr.cli.main import main; sys.exit(main())"
        cmd = [sys.executable, "-c", code, "worker", "--db", self.url, "-a", str(TOOLS), *args]
        return self._popen(cmd, name)

    def _popen(self, cmd: list[str], name: str) -> subprocess.Popen[bytes]:
        with (self.folder / f"{name}.log").open("ab") as log:  # the child keeps its own fd
            proc = subprocess.Popen(cmd, env=self.env(), stdout=log, stderr=subprocess.STDOUT)
        self.procs.append(proc)
        return proc

    def log(self, name: str) -> str:
        path = self.folder / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    @staticmethod
    def wait_for(check: Callable[[], bool], seconds: float, what: str) -> None:
        deadline = time.monotonic() + seconds
        while not check():
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {seconds}s waiting for {what}")
            time.sleep(0.02)

    def engine(self) -> Engine:
        return Engine(PostgresStore(self.url, max_size=4, db_clock=True))

    def start_many(self, engine: Engine, source: str, count: int, prefix: str) -> list[str]:
        engine.register(source)
        ids = [f"{prefix}-{i:05}" for i in range(count)]
        with ThreadPoolExecutor(4) as pool:
            list(pool.map(lambda i: engine.start(source, execution_id=i), ids))
        return ids

    def statuses(self) -> Counter[str]:
        """Executions by status (empty while the server does not answer: a restart test)."""
        try:
            with psycopg.connect(self.url, autocommit=True, connect_timeout=2) as conn:
                rows = conn.execute("SELECT status, count(*) FROM executions GROUP BY 1")
                return Counter(dict(rows.fetchall()))
        except psycopg.OperationalError:
            return Counter()

    def wait_all_finished(self, count: int, seconds: float) -> Counter[str]:
        deadline = time.monotonic() + seconds
        while True:
            seen = self.statuses()
            if sum(n for s, n in seen.items() if s != "running") >= count:
                return seen
            if time.monotonic() > deadline:
                logs = "\n".join(self.log(p.stem) for p in self.folder.glob("*.log"))
                raise AssertionError(f"not finished after {seconds}s: {dict(seen)}\n{logs[-3000:]}")
            time.sleep(0.1)

    def lines(self, kind: str = "effects") -> list[tuple[str, str, int, int]]:
        """(execution, step, attempt, pid) of every line of every process's `kind` file."""
        found = []
        for path in sorted(self.effects_dir.glob(f"{kind}-*.log")):
            for line in path.read_text().splitlines():
                if line.strip():
                    ex, step, attempt, pid = line.split()
                    found.append((ex, step, int(attempt), int(pid)))
        return found

    def check_invariants(self, engine: Engine, ids: list[str]) -> int:
        """Assert, from the durable history and the side-effect files: every execution
        completed; each step's result is recorded exactly once; every run of a side effect
        follows a durable start of its attempt (a re-run after a lost worker is the same
        attempt, started again with `recovery: n`); the completing attempt's effect exists;
        every other run is recorded as lost with its worker (as tests/chaos/test_sigkill.py
        on SQLite). Returns how many runs were lost with a worker (recoveries recorded)."""
        runs = Counter((ex, step, attempt) for ex, step, attempt, _ in self.lines())
        lost_total = 0
        for ex in ids:
            view = engine.query(ex)
            assert view.status == "completed", (ex, view.status)
            history = engine.history(ex)
            for step in view.activities:
                ours = [e for e in history if e.data.get("activity") == step]
                done = [e for e in ours if e.type == "ActivityCompleted"]
                assert len(done) == 1, (ex, step, "result recorded more than once")
                starts = Counter(e.data["attempt"] for e in ours if e.type == "ActivityStarted")
                lost = sum(1 for e in ours if e.type == "ActivityStarted" and "recovery" in e.data)
                ran = {
                    a: n for (e_ex, e_step, a), n in runs.items() if (e_ex, e_step) == (ex, step)
                }
                for attempt, n in ran.items():
                    assert n <= starts[attempt], (ex, step, attempt, "more runs than starts")
                assert ran.get(done[0].data["attempt"], 0) >= 1
                assert sum(ran.values()) - 1 <= lost, "an effect without a lost run"
                lost_total += lost
        return lost_total

    def stop(self, proc: subprocess.Popen[bytes], timeout: float = 20) -> int:
        """SIGTERM (continuing a stopped process first); SIGKILL after `timeout`."""
        if proc.poll() is None:
            proc.send_signal(signal.SIGCONT)
            proc.send_signal(signal.SIGTERM)
            try:
                return proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
        return proc.wait(10)

    def stop_all(self) -> list[int]:
        return [self.stop(p) for p in self.procs]


@pytest.fixture
def cluster(migrated_postgres_url: str, tmp_path: Path) -> Iterator[Cluster]:
    PostgresStore(migrated_postgres_url, max_size=1).close()  # migrated before any worker
    c = Cluster(migrated_postgres_url, tmp_path)
    try:
        yield c
    finally:
        for proc in c.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
                proc.kill()
            proc.wait(10)
