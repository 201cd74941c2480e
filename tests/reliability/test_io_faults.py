"""I/O faults: failing syncs and a full disk on SQLite, dropped connections on PostgreSQL.

What must hold, whatever fails:

- the API raises a `StoreError` (`StoreUnavailable` for the disk or the connection) and the
  CLI exits 1 with ``error: ...`` on stderr, never a traceback;
- nothing is acknowledged that is not durable: every start that returned is in the store
  after the process is gone, and every completion seen stays as it was;
- once the fault clears, the store works without a restart (the same process goes on,
  retries the starts that failed, and drives everything to completion), and the recovered
  record passes the crash invariants of `tests/chaos/invariants.py`;
- an error means "outcome unknown", not "not done": a failed start may have been applied,
  so the workloads retry with the same execution id (idempotent).

SQLite faults are injected by strace into a child (`io_child.py`, every store call on one
thread): ``fdatasync`` failing with EIO and ``pwrite64`` failing with ENOSPC, for a window
of calls; and for real, with a 1 MiB tmpfs filled up (root only). PostgreSQL connections
are killed with `pg_terminate_backend` between operations and in the middle of a commit.
"""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from tests.chaos.invariants import check_recovered, read_effects, sqlite_integrity

from wovyr.clock import ManualClock
from wovyr.engine.engine import Engine
from wovyr.errors import StoreUnavailable
from wovyr.store.base import ExecutionFilter
from wovyr.store.sqlite import SQLiteStore
from wovyr.testing import drain

from .crash_child import STEPS, THREE_STEPS, effect_registry
from .tracing import Sample, Zygote, copy_of, count_calls, injected, zygote

# Fault injection (strace, real full disks): CI runs it; the fast tier leaves it out.
pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
HELLO = REPO / "examples" / "hello.yaml"
WOVYR = Path(sys.executable).with_name("wovyr")
STARTS = 6
needs_strace = pytest.mark.usefixtures("strace_installed")  # skips locally, fails in CI


@dataclass
class Outcome:
    """What a faulted child reported (its log lines) and how many faults strace injected."""

    lines: list[str]
    injected: int

    def ids(self, *kinds: str) -> list[str]:
        return [ln.split()[1] for ln in self.lines if ln.split()[0] in kinds]

    def errors(self) -> list[str]:
        return [ln for ln in self.lines if ln.split()[0].endswith("err")]


@pytest.fixture(scope="module")
def zyg() -> Iterator[Zygote]:
    with zygote() as z:
        yield z


@pytest.fixture(scope="module")
def migrated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One migrated store, checkpointed into one file: each run starts from a copy, so the
    faults hit the workload, not the schema set-up (a copy costs a fortieth of a migration)."""
    path = tmp_path_factory.mktemp("migrated") / "w.db"
    SQLiteStore(path).close()
    return path


def run_faulted(z: Zygote, migrated: Path, workdir: Path, call: str, inject: str) -> Outcome:
    url, _ = copy_of(migrated, workdir)
    trace = workdir / "strace.out"
    code = z.run(
        url,
        workdir,
        ["-o", str(trace), "-e", f"trace={call}", "-e", f"inject={call}:{inject}"],
        workload="io",
        count=STARTS,
    )
    lines = (workdir / "log").read_text().splitlines()
    assert code == 0 and not [ln for ln in lines if ln.startswith("crash")], lines
    return Outcome(lines, injected(trace))


DISK_ERRORS = ("disk I/O error", "database or disk is full")


def check_nothing_acknowledged_lost(workdir: Path, outcome: Outcome) -> None:
    """The faulted process reported errors as `StoreUnavailable`, went on working, and the
    store it left holds everything it acknowledged."""
    for line in outcome.errors():
        assert " StoreUnavailable " in line and line.endswith(DISK_ERRORS), line
    acknowledged = outcome.ids("ok", "retry-ok")
    done = {ln.split()[1]: int(ln.split()[2]) for ln in outcome.lines if ln.startswith("done")}
    # The fault was a window: afterwards the same process finished everything it started.
    assert sorted(done) == sorted(acknowledged), outcome.lines
    sqlite_integrity(workdir / "w.db")
    store = SQLiteStore(workdir / "w.db")
    try:
        stored = store.list_executions(ExecutionFilter(tenant=None, limit=100)).items
        assert {r.id for r in stored} == set(done), "a start reported failed yet applied"
        for execution_id, seq in done.items():
            record = store.load(execution_id, "default")
            assert record is not None and record.seq == seq, (execution_id, "changed")
        check_recovered(store, done, STEPS, read_effects(workdir / "effects"))
    finally:
        store.close()


@pytest.fixture(scope="module")
def sqlite_calls(
    zyg: Zygote, migrated: Path, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, int]:
    url, workdir = copy_of(migrated, tmp_path_factory.mktemp("clean") / "run")
    counts, elsewhere = count_calls(
        zyg, url, workdir, ("fdatasync", "pwrite64"), workload="io", count=STARTS
    )
    assert not any(elsewhere.values()), elsewhere
    return counts


# --- SQLite: fsync fails with EIO, writes fail with ENOSPC (strace) ----------------------


@needs_strace
@pytest.mark.parametrize("where", [0.2, 0.8], ids=["while-starting", "while-running"])
def test_fsync_eio_is_an_error_and_the_store_recovers_in_process(
    zyg: Zygote, migrated: Path, sqlite_calls: dict[str, int], tmp_path: Path, where: float
) -> None:
    first = max(1, int(sqlite_calls["fdatasync"] * where))
    outcome = run_faulted(
        zyg, migrated, tmp_path / "run", "fdatasync", f"error=EIO:when={first}..{first + 2}"
    )
    assert outcome.injected == 3
    if where < 0.5:  # the starts met the fault: their callers were told
        assert outcome.ids("err"), outcome.lines
    assert all(ln.endswith("disk I/O error") for ln in outcome.errors()), outcome.lines
    check_nothing_acknowledged_lost(tmp_path / "run", outcome)


@needs_strace
@pytest.mark.parametrize("where", [0.1, 0.7], ids=["while-starting", "while-running"])
def test_disk_full_is_an_error_and_the_store_recovers_in_process(
    zyg: Zygote, migrated: Path, sqlite_calls: dict[str, int], tmp_path: Path, where: float
) -> None:
    first = max(1, int(sqlite_calls["pwrite64"] * where))
    # Each failed commit of a worker is resumed after a back-off: a few faults suffice.
    inject = f"error=ENOSPC:when={first}..{first + 3}"
    outcome = run_faulted(zyg, migrated, tmp_path / "run", "pwrite64", inject)
    assert outcome.injected == 4
    if where < 0.5:
        assert outcome.ids("err"), outcome.lines
    check_nothing_acknowledged_lost(tmp_path / "run", outcome)


@needs_strace
@pytest.mark.slow
@pytest.mark.timeout(900)
def test_every_sync_and_write_failing_once(
    zyg: Zygote, migrated: Path, sqlite_calls: dict[str, int], tmp_path: Path
) -> None:
    """The sweep: each fdatasync failing with EIO, each pwrite64 with ENOSPC, one at a
    time; a CI run tries the sweep's sample (`tracing.Sample`: one point in three at
    positions chosen by a seed the output names, and the first and last of each call),
    ``WOVYR_FULL_SWEEP=1`` every point:

        WOVYR_FULL_SWEEP=1 .venv/bin/python -m pytest -s tests/reliability/test_io_faults.py
    """
    faults = errors = 0
    error_of = {"fdatasync": "EIO", "pwrite64": "ENOSPC"}
    sample = Sample.from_env()
    picked = sample.pick_calls({call: sqlite_calls[call] for call in error_of})
    print(sample.line(len(picked), sum(sqlite_calls[call] for call in error_of)))
    for call, n in picked:
        workdir = tmp_path / f"{call}-{n}"
        outcome = run_faulted(zyg, migrated, workdir, call, f"error={error_of[call]}:when={n}")
        assert outcome.injected == 1, (call, n)
        check_nothing_acknowledged_lost(workdir, outcome)
        faults += outcome.injected
        errors += len(outcome.errors())
    print(f"sqlite faults injected={faults}, errors reported to callers={errors}")


# --- the CLI --------------------------------------------------------------------------


def wovyr(
    home: Path, *args: str, strace: list[str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """Run the CLI (under strace when asked) in its own process group, killed whole on
    timeout: a tracee whose strace is killed would otherwise run on, detached."""
    env = {**os.environ, "WOVYR_HOME": str(home), "NO_COLOR": "1"}
    env.pop("WOVYR_DATABASE_URL", None)
    command = [str(WOVYR), *args]
    if strace:
        command = ["strace", "-f", "-qq", "-o", "/dev/null", *strace, *command]
    proc = subprocess.Popen(
        command,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        raise AssertionError(
            f"wovyr {' '.join(args)} did not exit in {timeout}s: {err[-500:]}"
        ) from None
    return subprocess.CompletedProcess(command, proc.returncode, out, err)


def assert_clean_error(result: subprocess.CompletedProcess[str]) -> None:
    """Exit 1 ending with one `error: ...` line naming the disk fault, and no traceback
    (warnings about retried commits may come before it)."""
    assert result.returncode == 1, (result.returncode, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr + result.stdout, result.stderr
    assert result.stderr.rstrip().splitlines()[-1].startswith("error: "), result.stderr
    assert result.stderr.rstrip().endswith(DISK_ERRORS), result.stderr


def stored_ids(home: Path) -> set[str]:
    store = SQLiteStore(home / "wovyr.db")
    try:
        return {r.id for r in store.list_executions(ExecutionFilter(tenant=None)).items}
    finally:
        store.close()


@needs_strace
@pytest.mark.parametrize("inject", ["fdatasync:error=EIO", "pwrite64:error=ENOSPC"])
def test_cli_reports_a_disk_fault_as_an_error(tmp_path: Path, inject: str) -> None:
    home = tmp_path / "home"
    ok = wovyr(home, "run", str(HELLO), "--id", "before")
    assert ok.returncode == 0, ok.stderr
    failed = wovyr(home, "run", str(HELLO), "--id", "during", strace=["-e", f"inject={inject}"])
    assert_clean_error(failed)
    after = wovyr(home, "run", str(HELLO), "--id", "after")  # the fault is gone
    assert after.returncode == 0, after.stderr
    ids = stored_ids(home)
    assert {"before", "after"} <= ids and "during" not in ids  # reported failed: not applied
    sqlite_integrity(home / "wovyr.db")


@contextmanager
def tmpfs(path: Path, size: str = "4m") -> Iterator[Path]:
    """A small tmpfs mounted at `path` for the test (root only), unmounted afterwards. Room
    for a migrated store and its WAL (about 1 MiB together since the artifacts table), so
    what fills it is the test's ballast."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    path.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=True)


def fill(path: Path) -> int:
    """Write `path` until the file system is full; return the bytes written."""
    written = 0
    with open(path, "wb", buffering=0) as handle:
        while True:
            try:
                handle.write(b"\0" * 4096)
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
                return written
            written += 4096


def test_cli_on_a_full_disk_fails_cleanly_and_works_once_space_is_freed(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "disk") as disk:
        home = disk / "home"
        before = wovyr(home, "run", str(HELLO), "--id", "before")
        assert before.returncode == 0, before.stderr
        ballast = disk / "ballast"
        assert fill(ballast) > 0
        failed = wovyr(home, "run", str(HELLO), "--id", "during")
        assert_clean_error(failed)
        ballast.unlink()
        after = wovyr(home, "run", str(HELLO), "--id", "after")
        assert after.returncode == 0, after.stderr
        ids = stored_ids(home)
        assert {"before", "after"} <= ids and "during" not in ids
        sqlite_integrity(home / "wovyr.db")


FILLS_THE_DISK = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: fills-the-disk}
activities:
  - {id: fill, tool: fill_disk}
  - {id: after, needs: [fill], set: {ok: true}}
"""
FILL_DISK_MODULE = """\
import errno, os, wovyr


@wovyr.activity("fill_disk")
def fill_disk():
    with open(os.environ["BALLAST"], "ab", buffering=0) as handle:
        while True:
            try:
                handle.write(b"\\0" * 4096)
            except OSError as exc:
                if exc.errno == errno.ENOSPC:
                    return "full"
                raise
"""


@pytest.mark.slow
def test_cli_run_exits_with_an_error_when_the_disk_fills_up_mid_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with tmpfs(tmp_path / "disk") as disk:
        home = disk / "home"
        (tmp_path / "fill_disk.py").write_text(FILL_DISK_MODULE)
        (tmp_path / "fills.yaml").write_text(FILLS_THE_DISK)
        monkeypatch.setenv("BALLAST", str(disk / "ballast"))
        module, workflow = str(tmp_path / "fill_disk.py"), str(tmp_path / "fills.yaml")
        stuck = wovyr(home, "run", workflow, "--activities", module, timeout=30)
        assert_clean_error(stuck)
        (disk / "ballast").unlink()
        # Space is back: the execution the failed run left is finished by the next worker.
        assert wovyr(home, "run", str(HELLO)).returncode == 0
        sqlite_integrity(home / "wovyr.db")


# --- PostgreSQL: connections terminated by the server ----------------------------------


def terminate(app: str) -> int:
    """Terminate every server backend of `app` and wait (bounded) until they are gone (the
    pool may open new ones meanwhile); return how many were terminated."""
    import psycopg
    from tests.conftest import POSTGRES_URL

    with psycopg.connect(POSTGRES_URL, autocommit=True) as admin:
        # Two statements: never let a planner call pg_terminate_backend on another row.
        pids = [
            row[0]
            for row in admin.execute(
                "SELECT pid FROM pg_stat_activity WHERE application_name = %s", (app,)
            )
        ]
        for pid in pids:
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        deadline = time.monotonic() + 20
        while admin.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(%s)", (pids,)
        ).fetchone() != (0,):
            assert time.monotonic() < deadline, f"backends {pids} of {app} linger"
            time.sleep(0.01)
    return len(pids)


@pytest.fixture
def pg_engine(postgres_url: str, tmp_path: Path) -> Iterator[tuple[Engine, str, Path]]:
    from wovyr.store.postgres import PostgresStore

    app = f"wovyr-drop-{uuid.uuid4().hex[:10]}"
    effects = tmp_path / "effects"
    clock = ManualClock(datetime(2030, 1, 1, tzinfo=UTC))
    store = PostgresStore(f"{postgres_url}&application_name={app}", db_clock=False, max_size=4)
    engine = Engine(store, clock=clock, activities=effect_registry(effects))
    try:
        yield engine, app, effects
    finally:
        engine.close()


@pytest.mark.postgres
def test_connections_dropped_between_operations_are_replaced_or_reported(
    pg_engine: tuple[Engine, str, Path],
) -> None:
    engine, app, effects = pg_engine
    acked: dict[str, int] = {}
    unknown: dict[str, int] = {}
    dropped = 0

    def attempt(name: str, op: Any) -> None:
        nonlocal dropped
        dropped += terminate(app)
        try:
            op()
        except StoreUnavailable:
            unknown[name] = unknown.get(name, 0) + 1
        else:
            acked[name] = acked.get(name, 0) + 1

    for i in range(4):
        attempt("start", lambda i=i: engine.start(THREE_STEPS, execution_id=f"d-{i}"))
        attempt("query", lambda i=i: engine.query(f"d-{i}"))
        attempt("signal", lambda i=i: engine.signal(f"d-{i}", "poke", i))
        attempt("list", lambda: engine.list(limit=10))
        attempt("history", lambda i=i: engine.history(f"d-{i}"))
    attempt("cancel", lambda: engine.cancel("d-3"))
    attempt("drain", lambda: drain(engine))
    assert dropped >= 20, "the test terminated nothing"
    # Nothing reported done is lost; nothing reported failed happened more than once.
    advance(engine, hours=1)
    drain(engine)
    signals = sum(
        1 for i in range(4) for e in engine.history(f"d-{i}") if e.type == "SignalReceived"
    )
    assert acked.get("signal", 0) <= signals <= acked.get("signal", 0) + unknown.get("signal", 0)
    finished = {engine.query(f"d-{i}").status for i in range(3)}
    assert finished == {"completed"}
    check_recovered(engine.store, [f"d-{i}" for i in range(3)], STEPS, read_effects(effects))
    print(f"postgres connections dropped={dropped}, calls ok={acked}, unavailable={unknown}")


def advance(engine: Engine, **delta: float) -> None:
    assert isinstance(engine.clock, ManualClock)
    engine.clock.advance(**delta)


def _wait_for_lock_wait(app: str) -> int:
    """The pid of `app`'s backend once it waits for a row lock (bounded)."""
    import psycopg
    from tests.conftest import POSTGRES_URL

    deadline = time.monotonic() + 20
    with psycopg.connect(POSTGRES_URL, autocommit=True) as admin:
        while True:
            row = admin.execute(
                "SELECT pid FROM pg_stat_activity WHERE application_name = %s"
                " AND wait_event_type = 'Lock'",
                (app,),
            ).fetchone()
            if row:
                return int(row[0])
            assert time.monotonic() < deadline, "the commit never waited for the lock"
            time.sleep(0.005)


@pytest.mark.postgres
def test_a_signal_cut_off_mid_commit_is_never_reported_as_success(
    pg_engine: tuple[Engine, str, Path], postgres_url: str
) -> None:
    import psycopg

    engine, app, _ = pg_engine
    engine.start(THREE_STEPS, execution_id="cut")
    outcome: dict[str, Any] = {}

    def send() -> None:
        try:
            outcome["view"] = engine.signal("cut", "go")
        except BaseException as exc:
            outcome["error"] = exc

    with psycopg.connect(postgres_url) as holder:  # a transaction holding the row lock
        holder.execute("SELECT 1 FROM executions WHERE id = 'cut' FOR UPDATE")
        sender = threading.Thread(target=send)
        sender.start()
        terminate_pid(_wait_for_lock_wait(app))
        holder.rollback()
    sender.join(timeout=30)
    assert "view" not in outcome, "a commit whose connection died was reported as done"
    assert isinstance(outcome.get("error"), StoreUnavailable), outcome
    assert "may or may not have been applied" in str(outcome["error"])
    history = engine.history("cut")
    assert not [e for e in history if e.type == "SignalReceived"]  # it died before COMMIT
    engine.signal("cut", "go")  # the engine works again, on a new connection
    assert [e.type for e in engine.history("cut")].count("SignalReceived") == 1


def terminate_pid(pid: int) -> None:
    import psycopg
    from tests.conftest import POSTGRES_URL

    with psycopg.connect(POSTGRES_URL, autocommit=True) as admin:
        assert admin.execute("SELECT pg_terminate_backend(%s)", (pid,)).fetchone() == (True,)


@pytest.mark.postgres
def test_a_worker_commit_cut_off_midway_is_redone_exactly_once(
    pg_engine: tuple[Engine, str, Path], postgres_url: str
) -> None:
    """The result commit of step s1 loses its connection: the result is not recorded, and
    the attempt is redone (at least once); every result ends up recorded exactly once."""
    import psycopg

    engine, app, effects = pg_engine
    holder = psycopg.connect(postgres_url)
    locked = threading.Event()
    inner = engine.activities.get("effect")

    async def effect(step: str, ctx: Any) -> Any:
        result = await inner(step=step, ctx=ctx)
        if step == "s1" and not locked.is_set():  # hold the row while its result commits
            holder.execute("SELECT 1 FROM executions WHERE id = 'w' FOR UPDATE")
            locked.set()
        return result

    engine.activities.register("effect", effect)
    engine.start(THREE_STEPS, execution_id="w")
    errors: list[BaseException] = []

    def run() -> None:
        try:
            drain(engine)
        except BaseException as exc:
            errors.append(exc)

    worker = threading.Thread(target=run)
    worker.start()
    try:
        assert locked.wait(timeout=20)
        terminate_pid(_wait_for_lock_wait(app))
    finally:
        holder.rollback()
        holder.close()
    worker.join(timeout=60)
    assert not worker.is_alive()
    advance(engine, hours=1)
    drain(engine)  # whatever the first worker left leased
    report = check_recovered(engine.store, ["w"], STEPS, read_effects(effects))
    first = [
        (e.type, e.data.get("recovery"))
        for e in engine.history("w")
        if e.data.get("activity") == "s1"
    ]
    # the cut-off result was not recorded: the one recorded came from the re-run attempt
    assert first.index(("ActivityStarted", 1)) < first.index(("ActivityCompleted", None))
    assert report.lost[("w", "s1")] == {1}, "the cut-off attempt is recorded as lost"
