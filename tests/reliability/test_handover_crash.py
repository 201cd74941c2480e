"""A crash exactly at a continue-as-new hand-over leaves exactly one live run.

The `chain` workload of `crash_child.py` (one execution that continues as new three times,
each run one `effect` step) runs in a forked child that strace SIGKILLs at its N-th
`pwrite64` (every page SQLite writes: WAL frames, checkpoints), and, in a second sweep, at
its N-th `fdatasync`, for each N. After each kill the store as the kill left it must hold
a well-formed chain: runs 1..k, each but the last `continued` with a link to the next that
exists, and exactly one live run (the last; none once the last completed). Then a clean
worker recovers and the chain must be complete: four runs, linked both ways, the last
completed with output 4, each run's step run once, or twice when the kill landed inside it.

The hand-over is one transaction, so the number of runs the store shows moves from k to
k+1 between two consecutive crash points of the `pwrite64` sweep, never through a state
with the old run `continued` and no next run or two live runs: the sweep asserts it sees
all three hand-overs that way (the kills at either side of each hand-over's commit frame).
On PostgreSQL the client is killed at each of its `sendto` calls (every message libpq
sends), with the same checks.

A CI run tries a sample of the points (`tracing.Sample`: one in three at positions chosen by
a seed the output names, and the first and last of each call), and then, by bisection
between the points tried, the two consecutive points around each change in the runs the
store shows: so each hand-over is still crashed on both sides of its commit, and the runs
shown must never go back. ``WOVYR_FULL_SWEEP=1`` tries every point:

    WOVYR_FULL_SWEEP=1 .venv/bin/python -m pytest -s tests/reliability/test_handover_crash.py

Every kill starts from a store that is already migrated (a copy of one migrated SQLite file;
the one PostgreSQL schema emptied between kills): crashes inside a migration are
`test_crash_points.py`'s, and leaving them out here halves the sweeps.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path

import pytest
from tests.chaos.invariants import read_effects, sqlite_integrity
from tests.pg_schemas import SchemaPool, backends_gone

from wovyr.clock import ManualClock
from wovyr.engine.core.state import state_from_json
from wovyr.engine.engine import Engine
from wovyr.ids import continued_id
from wovyr.store import open_store
from wovyr.store.base import ExecutionFilter
from wovyr.testing import drain

from .crash_child import CHAIN_RUNS, effect_registry
from .test_crash_points import manual_store
from .tracing import Sample, Zygote, copy_of, count_calls, zygote

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("strace_installed")]
CALLS = ("pwrite64", "fdatasync")
MAX_CRASH_POINTS = 600
RUNS = [continued_id("chain", n) for n in range(1, CHAIN_RUNS + 1)]


def chain_as_stored(url: str) -> list[tuple[str, str, str | None, str | None]]:
    """(id, status, continued_as, continued_from) of each run, in chain order; checked to
    be a well-formed chain with at most one live run."""
    store = manual_store(url)
    try:
        rows = store.list_executions(ExecutionFilter(tenant=None, limit=100)).items
        found = {}
        for row in rows:
            record = store.load(row.id, row.tenant)
            assert record is not None
            state = state_from_json(record.checkpoint or {})
            found[row.id] = (row.id, row.status, state.continued_as, state.continued_from)
    finally:
        store.close()
    assert set(found) <= set(RUNS), sorted(found)
    runs = [found[r] for r in RUNS if r in found]
    assert [r[0] for r in runs] == RUNS[: len(runs)], "the runs are not a prefix of the chain"
    live = [r for r in runs if r[1] == "running"]
    assert len(live) <= 1, f"two live runs: {runs}"
    for i, (_, status, continued_as, continued_from) in enumerate(runs):
        assert continued_from == (RUNS[i - 1] if i else None), runs
        if i < len(runs) - 1:
            assert (status, continued_as) == ("continued", RUNS[i + 1]), runs
        else:  # the last run is the live one, or the chain's end
            assert status in ("running", "completed") and continued_as is None, runs
            assert status == "running" or i == CHAIN_RUNS - 1, runs  # only run 4 completes
    return runs


def recover_and_check(url: str, workdir: Path) -> None:
    """A clean worker past every lease drives the chain to its end; check it whole."""
    clock = ManualClock(datetime.now(UTC) + timedelta(hours=1))
    engine = Engine(
        manual_store(url),
        clock=clock,
        activities=effect_registry(workdir / "effects"),
        min_continue_interval=0,  # as the child's: each hand-over at once, on a still clock
    )
    try:
        drain(engine)
        acks = (workdir / "acks").read_text().split("\n") if (workdir / "acks").exists() else []
        runs = chain_as_stored(url)
        if not runs:  # killed before the start committed: nothing was acknowledged
            assert not any(a.startswith("start ") for a in acks), acks
            return
        assert [r[1] for r in runs] == ["continued"] * (CHAIN_RUNS - 1) + ["completed"]
        view = engine.query("chain")
        assert (view.id, view.output) == (RUNS[-1], CHAIN_RUNS)
        for line in acks:
            if line.startswith("done "):
                _, run_id, seq = line.split()
                assert (run_id, view.event_count) == (view.id, int(seq)), "changed after done"
        steps = Counter((e[0], e[1]) for e in read_effects(workdir / "effects"))
        for n, run_id in enumerate(RUNS, 1):
            assert 1 <= steps[(run_id, f"run{n}")] <= 2, steps  # one kill, one loss at most
        assert sum(steps.values()) <= CHAIN_RUNS + 1, steps
    finally:
        engine.close()


def kill_chain_at(
    z: Zygote, url: str, workdir: Path, call: str, n: int, check_crashed: Callable[[], None]
) -> tuple[int, int]:
    """Kill the chain at its N-th `call`, check the store as the kill left it, recover and
    check the chain whole: (the child's exit code, the runs the store showed after the kill)."""
    trace = ["-o", "/dev/null", "-e", f"trace={call}"]
    inject = ["-e", f"inject={call}:signal=KILL:when={n}"]
    code = z.run(url, workdir, [*trace, *inject], workload="chain", count=1)
    assert code in (0, -9), f"{call} #{n}: the child exited with {code}"
    check_crashed()
    try:
        shown = len(chain_as_stored(url))
        recover_and_check(url, workdir)
    except AssertionError as exc:
        raise AssertionError(f"after a kill at {call} #{n}: {exc}") from exc
    return code, shown


def refine(seen: dict[int, int], runs_after_kill_at: Callable[[int], int]) -> list[int]:
    """Bisect between tried points until every change in the runs shown lies between two
    consecutive points; check the runs shown never go back and that each of the three
    hand-overs was crashed on both sides of its commit (from k to k+1 between point N and
    N+1); return the points where the runs shown grow."""
    while gaps := [
        (a, b) for a, b in itertools.pairwise(sorted(seen)) if seen[a] != seen[b] and b > a + 1
    ]:
        for a, b in gaps:
            seen[(a + b) // 2] = runs_after_kill_at((a + b) // 2)
    shown = [seen[n] for n in sorted(seen)]
    assert shown == sorted(shown), f"the runs shown went back: {sorted(seen.items())}"
    pairs = list(itertools.pairwise(sorted(seen)))
    hand_overs = [seen[a] for a, b in pairs if seen[b] == seen[a] + 1 and seen[a] and b == a + 1]
    assert hand_overs == [1, 2, 3], sorted(seen.items())
    return [b for a, b in pairs if seen[a] != seen[b]]


@pytest.mark.timeout(900)
def test_a_kill_at_any_write_of_the_hand_over_leaves_one_live_run(tmp_path: Path) -> None:
    """The sampled `pwrite64` and `fdatasync` points (`tracing.Sample`; every one with
    WOVYR_FULL_SWEEP=1), and the `pwrite64` points found by bisection between them where
    the runs shown grow."""
    template = tmp_path / "template" / "w.db"
    template.parent.mkdir()
    open_store(f"sqlite:///{template}").close()  # migrated once; each kill starts from a copy
    sample = Sample.from_env()

    def target(name: str) -> tuple[str, Path]:
        return copy_of(template, tmp_path / name)

    with zygote() as z:
        url, clean = target("clean")
        counts, elsewhere = count_calls(z, url, clean, CALLS, workload="chain", count=1)
        assert [r[1] for r in chain_as_stored(url)] == ["continued"] * 3 + ["completed"]
        recover_and_check(url, clean)
        assert not any(elsewhere.values()), f"store calls off the main thread: {elsewhere}"
        assert sum(counts.values()) <= MAX_CRASH_POINTS, counts
        killed = 0

        def kill_at(call: str, n: int) -> int:
            """The runs the store shows after a kill at the N-th `call`, then recovered."""
            nonlocal killed
            url, workdir = target(f"{call}-{n}")

            def integrity() -> None:
                if (workdir / "w.db").exists():
                    sqlite_integrity(workdir / "w.db")

            code, shown = kill_chain_at(z, url, workdir, call, n, integrity)
            killed += code == -9
            return shown

        picked = sample.pick_calls(counts)
        print(sample.line(len(picked), sum(counts.values())))
        seen = {n: kill_at(call, n) for call, n in picked if call == "pwrite64"}
        for call, n in picked:
            if call != "pwrite64":
                kill_at(call, n)
        moved = refine(seen, lambda n: kill_at("pwrite64", n))
    tried = len(seen) + sum(call != "pwrite64" for call, _ in picked)
    assert killed == tried, (killed, tried, counts)
    print(
        f"hand-over crash points: pwrite64 {counts['pwrite64']}, fdatasync "
        f"{counts['fdatasync']}, {tried} tried, all killed; the runs shown grow at "
        f"pwrite64 #{moved}"
    )


@pytest.mark.postgres
@pytest.mark.timeout(900)
def test_a_client_killed_at_any_send_of_the_hand_over_leaves_one_live_run(
    tmp_path: Path, schema_pool: SchemaPool
) -> None:
    """The same chain on PostgreSQL, the client SIGKILLed at its `sendto` calls (every
    message libpq sends; the server rolls back what was not committed), each kill on a
    migrated schema with no rows (`tests/pg_schemas.py`): the sampled ones
    (`tracing.Sample`; every one with WOVYR_FULL_SWEEP=1) and those found by bisection
    between them where the runs shown grow."""
    from tests.conftest import POSTGRES_URL, _require_postgres

    _require_postgres()
    sample = Sample.from_env()
    with schema_pool.one_at_a_time() as next_url, zygote() as z:
        url, workdir = next_url(), tmp_path / "clean"
        counts, _ = count_calls(z, url, workdir, ("sendto",), workload="chain", count=1)
        recover_and_check(url, workdir)
        assert counts["sendto"] <= MAX_CRASH_POINTS, counts

        def kill_at(n: int) -> int:
            url, workdir = next_url(), tmp_path / f"sendto-{n}"
            gone = partial(backends_gone, POSTGRES_URL, url)
            return kill_chain_at(z, url, workdir, "sendto", n, gone)[1]

        picked = sample.pick_calls(counts)
        print(sample.line(len(picked), counts["sendto"]))
        seen = {n: kill_at(n) for _, n in picked}
        moved = refine(seen, kill_at)
    print(f"postgres hand-over crash points: sendto {counts['sendto']}; runs grow at #{moved}")
