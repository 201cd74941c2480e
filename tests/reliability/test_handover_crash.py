"""A crash exactly at a continue-as-new hand-over leaves exactly one live run.

The `chain` workload of `crash_child.py` (one execution that continues as new three times,
each run one `effect` step) runs in a forked child that strace SIGKILLs at its N-th
`pwrite64` (every page SQLite writes: WAL frames, checkpoints), and, in a second sweep, at
its N-th `fdatasync`, for every N. After each kill the store as the kill left it must hold
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

Every kill starts from a store that is already migrated (a copy of one migrated SQLite file;
the one PostgreSQL schema emptied between kills): crashes inside a migration are
`test_crash_points.py`'s, and leaving them out here halves the sweeps.
"""

from __future__ import annotations

import itertools
from collections import Counter
from datetime import UTC, datetime, timedelta
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
from .tracing import copy_of, count_calls, zygote

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


@pytest.mark.timeout(900)
def test_a_kill_at_any_write_of_the_hand_over_leaves_one_live_run(tmp_path: Path) -> None:
    template = tmp_path / "template" / "w.db"
    template.parent.mkdir()
    open_store(f"sqlite:///{template}").close()  # migrated once; each kill starts from a copy

    def target(name: str) -> tuple[str, Path]:
        return copy_of(template, tmp_path / name)

    with zygote() as z:
        url, clean = target("clean")
        counts, elsewhere = count_calls(z, url, clean, CALLS, workload="chain", count=1)
        assert [r[1] for r in chain_as_stored(url)] == ["continued"] * 3 + ["completed"]
        recover_and_check(url, clean)
        assert not any(elsewhere.values()), f"store calls off the main thread: {elsewhere}"
        assert sum(counts.values()) <= MAX_CRASH_POINTS, counts
        seen: dict[str, list[int]] = {}  # runs the store showed after the kill at each point
        killed = 0
        for call in CALLS:
            for n in range(1, counts[call] + 1):
                url, workdir = target(f"{call}-{n}")
                trace = ["-o", "/dev/null", "-e", f"trace={call}"]
                inject = ["-e", f"inject={call}:signal=KILL:when={n}"]
                code = z.run(url, workdir, [*trace, *inject], workload="chain", count=1)
                assert code in (0, -9), f"{call} #{n}: the child exited with {code}"
                killed += code == -9
                if (workdir / "w.db").exists():
                    sqlite_integrity(workdir / "w.db")
                try:
                    seen.setdefault(call, []).append(len(chain_as_stored(url)))
                    recover_and_check(url, workdir)
                except AssertionError as exc:
                    raise AssertionError(f"after a kill at {call} #{n}: {exc}") from exc
    assert killed == sum(counts.values()), (killed, counts)
    writes = seen["pwrite64"]
    hand_overs = [k for k, after in itertools.pairwise(writes) if after == k + 1 and k]
    moved = [n + 2 for n, (a, b) in enumerate(itertools.pairwise(writes)) if a != b]
    print(
        f"hand-over crash points: pwrite64 {counts['pwrite64']}, fdatasync "
        f"{counts['fdatasync']}, all killed; the runs shown grow at pwrite64 #{moved}"
    )
    assert hand_overs == [1, 2, 3], writes  # each hand-over's commit was crashed on both sides


@pytest.mark.postgres
@pytest.mark.timeout(900)
def test_a_client_killed_at_any_send_of_the_hand_over_leaves_one_live_run(
    tmp_path: Path, schema_pool: SchemaPool
) -> None:
    """The same chain on PostgreSQL, the client SIGKILLed at each of its `sendto` calls
    (every message libpq sends; the server rolls back what was not committed), each kill on
    a migrated schema with no rows (`tests/pg_schemas.py`)."""
    from tests.conftest import POSTGRES_URL, _require_postgres

    _require_postgres()
    seen: list[int] = []
    with schema_pool.one_at_a_time() as next_url, zygote() as z:
        url, workdir = next_url(), tmp_path / "clean"
        counts, _ = count_calls(z, url, workdir, ("sendto",), workload="chain", count=1)
        recover_and_check(url, workdir)
        assert counts["sendto"] <= MAX_CRASH_POINTS, counts
        for n in range(1, counts["sendto"] + 1):
            url, workdir = next_url(), tmp_path / f"sendto-{n}"
            trace = ["-o", "/dev/null", "-e", "trace=sendto"]
            inject = ["-e", f"inject=sendto:signal=KILL:when={n}"]
            code = z.run(url, workdir, [*trace, *inject], workload="chain", count=1)
            assert code in (0, -9), f"sendto #{n}: the child exited with {code}"
            backends_gone(POSTGRES_URL, url)
            try:
                seen.append(len(chain_as_stored(url)))
                recover_and_check(url, workdir)
            except AssertionError as exc:
                raise AssertionError(f"after a kill at sendto #{n}: {exc}") from exc
    moved = [n + 2 for n, (a, b) in enumerate(itertools.pairwise(seen)) if a != b]
    print(f"postgres hand-over crash points: sendto {counts['sendto']}; runs grow at #{moved}")
    assert [k for k, after in itertools.pairwise(seen) if after == k + 1 and k] == [1, 2, 3], seen
