"""Deterministic crash points: kill the worker at the N-th sync, write and rename, for each N.

A clean traced run of a short workload (three executions of three `effect` steps, started
and driven by one worker process; one of them with an input that puts its checkpoint over
the size stored as a base and deltas) first counts the system calls; then, for each counted
call N (of the sample below), a fresh child is SIGKILLed by strace exactly at that call
(``-e inject=SYSCALL:signal=KILL:when=N``), a clean worker recovers the store in this
process, and the invariants of `tests/chaos/invariants.py` are checked, plus:

- every start the child acknowledged (``start <id>`` written after `start` returned) exists
  and completed; every completion it saw (``done <id> <seq>``) still has exactly `seq`
  events: nothing acknowledged is lost and nothing is added to a finished execution;
- one kill loses at most one attempt of a step, so a step's side effects are 1, or 2 when
  the kill landed inside it after the side effect;
- SQLite: `PRAGMA integrity_check` is ok.

On SQLite the calls are `fdatasync` (SQLite syncs with it on Linux), `fsync`, `pwrite64`
(every page write of the WAL, the checkpoint and the database), `write` (the child's
acknowledgements and side effects) and `rename`; on PostgreSQL, the client side:
`sendto` (every message libpq sends, and asyncio's self-pipe) and `write`. The server's own
fsync is the server's business.

A CI run tries one crash point in three of each sweep, at positions chosen by a seed, and
the first and last point of each call (`tracing.Sample`: the output names the seed;
``WOVYR_SWEEP_SEED=<seed>`` tries the same points again, ``WOVYR_FULL_SWEEP=1`` tries every
point, as CI did until the slow tier outgrew its time):

    WOVYR_FULL_SWEEP=1 .venv/bin/python -m pytest -s tests/reliability/test_crash_points.py

Children fork from a zygote that imported everything once, and strace attaches to each
(see `crash_child.py`), so a crash point costs about 0.1 s rather than an interpreter start.
Each point starts from a migrated store (a copy of a migrated SQLite file; a migrated,
emptied PostgreSQL schema from `tests/pg_schemas.py`), so the sweep is the workload's; the
migrations' own calls, made by a child that creates the store, are crossed at each of
their syncs on SQLite and at their first, a middle and their last write or send.
"""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from tests.chaos.invariants import CrashReport, check_recovered, read_effects, sqlite_integrity
from tests.pg_schemas import SchemaPool, backends_gone

from wovyr.clock import ManualClock
from wovyr.engine.engine import Engine
from wovyr.store import open_store
from wovyr.store.base import ExecutionFilter, Store
from wovyr.store.sqlite import SQLiteStore
from wovyr.testing import drain

from .crash_child import STEPS, effect_registry
from .tracing import Sample, Zygote, count_calls, zygote

EXECUTIONS = 3
SQLITE_CALLS = ("fdatasync", "fsync", "pwrite64", "write", "rename")
POSTGRES_CALLS = ("sendto", "write")
# Work is bounded by counting crash points, not by a clock: a workload that grows past this
# fails at once with its counts (SQLite has about 195 today, PostgreSQL about 66).
MAX_CRASH_POINTS = 600

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("strace_installed")]


@dataclass
class Tally:
    tried: dict[str, int] = field(default_factory=dict)
    killed: dict[str, int] = field(default_factory=dict)
    inside: int = 0
    lost: int = 0

    def line(self, store: str) -> str:
        parts = [f"{c}: {self.killed.get(c, 0)}/{n} killed" for c, n in self.tried.items()]
        return (
            f"{store} crash points tried={sum(self.tried.values())} "
            f"killed={sum(self.killed.values())} ({'; '.join(parts)}); "
            f"attempts lost={self.lost}, kills inside a step={self.inside}"
        )


def manual_store(url: str) -> Store:
    """The store at `url`, measuring leases with the engine's (manual) clock."""
    if url.startswith("postgresql"):
        from wovyr.store.postgres import PostgresStore

        return PostgresStore(url, db_clock=False)
    return open_store(url)


def recover_and_check(url: str, workdir: Path, killed: bool) -> CrashReport:
    """Drive everything to the end with a clean worker whose clock is past every lease,
    then check every invariant against what the child acknowledged."""
    clock = ManualClock(datetime.now(UTC) + timedelta(hours=1))
    engine = Engine(manual_store(url), clock=clock, activities=effect_registry(workdir / "effects"))
    try:
        drain(engine)
        acks = (workdir / "acks").read_text().split("\n") if (workdir / "acks").exists() else []
        started = [ln.split()[1] for ln in acks if ln.startswith("start ")]
        done = {ln.split()[1]: int(ln.split()[2]) for ln in acks if ln.startswith("done ")}
        stored = engine.store.list_executions(ExecutionFilter(tenant=None, limit=100)).items
        ids = sorted({r.id for r in stored} | set(started))
        if not killed:
            assert len(started) == EXECUTIONS and len(done) == EXECUTIONS, acks
        report = check_recovered(engine.store, ids, STEPS, read_effects(workdir / "effects"))
        for execution_id, seq in done.items():
            record = engine.store.load(execution_id, "default")
            assert record is not None and record.seq == seq, (execution_id, "changed after done")
        for key, attempts in report.lost.items():
            assert len(attempts) <= (1 if killed else 0), (key, attempts, "one kill, one loss")
        return report
    finally:
        engine.close()


def sweep(
    z: Zygote,
    calls: tuple[str, ...],
    counts: dict[str, int],
    new_target: Callable[[str], tuple[str, Path]],
    check_crashed: Callable[[str, Path], None],
    *,
    workload: str = "crash",
) -> Tally:
    """The crash points of every call that this run samples (`Sample`: all of them with
    WOVYR_FULL_SWEEP=1): kill, check the crashed store, recover, check (`workload`: of
    `crash_child.py`, one whose acks and effects `recover_and_check` reads)."""
    tally = Tally()
    points = {call: counts[call] for call in calls}
    assert sum(points.values()) <= MAX_CRASH_POINTS, f"too many crash points: {points}"
    sample = Sample.from_env()
    picked = sample.pick_calls(points)
    print(sample.line(len(picked), sum(points.values())))
    for call, n in picked:
        url, workdir = new_target(f"{call}-{n}")
        trace = ["-o", "/dev/null", "-e", f"trace={call}"]
        inject = ["-e", f"inject={call}:signal=KILL:when={n}"]
        code = z.run(url, workdir, [*trace, *inject], workload=workload)
        assert code in (0, -9), f"{call} #{n}: the child exited with {code}"
        tally.tried[call] = tally.tried.get(call, 0) + 1
        tally.killed[call] = tally.killed.get(call, 0) + (code == -9)
        check_crashed(url, workdir)
        try:
            report = recover_and_check(url, workdir, killed=code == -9)
        except AssertionError as exc:
            raise AssertionError(f"after a kill at {call} #{n} (exit {code}): {exc}") from exc
        tally.inside += report.inside_kills
        tally.lost += report.lost_attempts
    return tally


@pytest.mark.timeout(600)
def test_sqlite_crash_points(tmp_path: Path) -> None:
    """The sampled crash points of the workload, each on a copy of a migrated file; the
    migrations' own calls (the child creates and migrates a new file) at each of their
    syncs and renames and at the first, a middle and the last of their writes."""
    template = tmp_path / "template" / "w.db"
    template.parent.mkdir()
    SQLiteStore(template).close()  # one file: the close checkpointed and removed the WAL

    def target(name: str, *, migrated: bool = True) -> tuple[str, Path]:
        workdir = tmp_path / name
        if migrated:
            workdir.mkdir(parents=True)
            shutil.copyfile(template, workdir / "w.db")
        return f"sqlite:///{workdir / 'w.db'}", workdir

    def integrity(url: str, workdir: Path) -> None:
        """The file as the kill left it (WAL included) is a consistent database."""
        if (workdir / "w.db").exists():
            sqlite_integrity(workdir / "w.db")

    with zygote() as z:
        url, workdir = target("clean")
        counts, elsewhere = count_calls(z, url, workdir, SQLITE_CALLS)
        recover_and_check(url, workdir, killed=False)
        with sqlite3.connect(workdir / "w.db") as conn:  # ex-1's checkpoint: in parts
            where = conn.execute(
                "SELECT x.checkpoint, count(p.seq) FROM executions x LEFT JOIN checkpoint_parts p"
                " ON p.tenant = x.tenant AND p.execution_id = x.id WHERE x.id = 'ex-1'"
            ).fetchone()
        assert where == ("", 1), where
        assert counts["fdatasync"] + counts["fsync"] >= 2 * EXECUTIONS, counts
        assert not any(elsewhere.values()), f"store calls off the main thread: {elsewhere}"
        tally = sweep(z, SQLITE_CALLS, counts, target, integrity)
        url, workdir = target("migrating", migrated=False)
        fresh, _ = count_calls(z, url, workdir, SQLITE_CALLS)
        added = {call: fresh[call] - counts[call] for call in SQLITE_CALLS}
        assert added["pwrite64"] > 2 and added["fdatasync"] + added["fsync"] > 0, added
        points = [
            (call, n)
            for call in SQLITE_CALLS
            for n in sorted(
                range(1, added[call] + 1)
                if call in ("fdatasync", "fsync", "rename")
                else {1, added[call] // 2, added[call]} - {0}
            )
        ]
        for call, n in points:
            url, workdir = target(f"migrating-{call}-{n}", migrated=False)
            trace = ["-o", "/dev/null", "-e", f"trace={call}"]
            code = z.run(url, workdir, [*trace, "-e", f"inject={call}:signal=KILL:when={n}"])
            assert code == -9, f"migrating, {call} #{n}: the child exited with {code}"
            integrity(url, workdir)
            recover_and_check(url, workdir, killed=True)
        print(f"sqlite crash points inside the migrations: {len(points)} of {added}")
    for name in ("clean", "fdatasync-1", f"pwrite64-{counts['pwrite64']}"):
        integrity("", tmp_path / name)  # and after recovery
    print(tally.line("sqlite"))
    killed = sum(tally.killed.values())
    assert killed == sum(tally.tried.values()), tally.line("sqlite")
    assert tally.lost > 0, "no kill ever landed inside a step: the sweep tests nothing"


@pytest.mark.postgres
@pytest.mark.timeout(600)
def test_postgres_client_crash_points(tmp_path: Path, schema_pool: SchemaPool) -> None:
    """Each crash point on a migrated schema of its own, emptied for the next one once its
    checks are done (`tests/pg_schemas.py`); the migrations' own sends (all in one
    transaction) are crossed at three points on fresh schemas the child migrates."""
    from tests.conftest import POSTGRES_URL, _require_postgres

    _require_postgres()

    def gone(url: str, workdir: Path) -> None:
        backends_gone(POSTGRES_URL, url)

    with schema_pool.one_at_a_time() as next_url, zygote() as z:

        def target(name: str, *, migrated: bool = True) -> tuple[str, Path]:
            return next_url(migrated=migrated), tmp_path / name

        url, workdir = target("clean")
        counts, elsewhere = count_calls(z, url, workdir, POSTGRES_CALLS)
        recover_and_check(url, workdir, killed=False)
        assert counts["sendto"] >= 3 * EXECUTIONS, counts
        # The pool opens its connections on its own threads: those few sends are not
        # crash points of their own (the main thread's N-th send always comes first).
        print(f"postgres calls off the main thread: {elsewhere}")
        tally = sweep(z, POSTGRES_CALLS, counts, target, gone)
        # A fresh schema, migrated by the child: kills at the first, a middle and the
        # last of the sends the migrations add, each then recovered by a clean worker.
        url, workdir = target("migrating", migrated=False)
        fresh_counts, _ = count_calls(z, url, workdir, ("sendto",))
        added = fresh_counts["sendto"] - counts["sendto"]
        assert added > 2, (fresh_counts, counts)
        for n in sorted({1, added // 2, added}):
            url, workdir = target(f"migrating-{n}", migrated=False)
            trace = ["-o", "/dev/null", "-e", "trace=sendto"]
            code = z.run(url, workdir, [*trace, "-e", f"inject=sendto:signal=KILL:when={n}"])
            assert code == -9, f"migrating, sendto #{n}: the child exited with {code}"
            gone(url, workdir)
            recover_and_check(url, workdir, killed=True)
    print(tally.line("postgres"))
    assert sum(tally.killed.values()) >= 0.9 * sum(tally.tried.values()), tally.line("postgres")
    assert tally.lost > 0, "no kill ever landed inside a step: the sweep tests nothing"
