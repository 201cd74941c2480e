"""A workflow written as a Python function under a kill at every write: nothing acknowledged
is lost and no completed step runs again.

The `code` workload of `crash_child.py` is the crash-point workload's three `effect` steps
as a function (`crash_code`: s1, then s2 and s3 together with `asyncio.gather`), three
executions started and driven by one worker in a forked child. strace SIGKILLs the child at
its N-th `pwrite64` (every page SQLite writes) and, in a second sweep, at its N-th
`fdatasync`, for each N of the sweep's sample (`tracing.Sample`, as in
`test_crash_points.py`: ``WOVYR_FULL_SWEEP=1`` tries every N); a clean worker in this
process then replays the functions from their histories and drives them to the end, and
`recover_and_check` asserts what `test_crash_points.py` asserts for the YAML workload: every
acknowledged start exists and completed, an acknowledged completion is unchanged, each
step's result is recorded once and its side effect ran once (twice only when the kill
landed inside it, after the effect), the checkpoint is the fold of the log; and
`PRAGMA integrity_check` is ok.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from tests.chaos.invariants import sqlite_integrity

from wovyr.store.sqlite import SQLiteStore

from .test_crash_points import recover_and_check, sweep
from .tracing import count_calls, zygote

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("strace_installed")]
CALLS = ("pwrite64", "fdatasync")
MAX_CRASH_POINTS = 400


@pytest.mark.timeout(600)
def test_code_workflow_crash_points(tmp_path: Path) -> None:
    template = tmp_path / "template" / "w.db"
    template.parent.mkdir()
    SQLiteStore(template).close()

    def target(name: str) -> tuple[str, Path]:
        workdir = tmp_path / name
        workdir.mkdir(parents=True)
        shutil.copyfile(template, workdir / "w.db")
        return f"sqlite:///{workdir / 'w.db'}", workdir

    def integrity(url: str, workdir: Path) -> None:
        sqlite_integrity(workdir / "w.db")

    with zygote() as z:
        url, workdir = target("clean")
        counts, elsewhere = count_calls(z, url, workdir, CALLS, workload="code")
        recover_and_check(url, workdir, killed=False)
        assert not any(elsewhere.values()), f"store calls off the main thread: {elsewhere}"
        assert sum(counts.values()) <= MAX_CRASH_POINTS, f"too many crash points: {counts}"
        tally = sweep(z, CALLS, counts, target, integrity, workload="code")
    print(tally.line("sqlite, code workflows"))
    assert sum(tally.killed.values()) == sum(tally.tried.values()), tally.line("code")
    assert tally.lost > 0, "no kill ever landed inside a step: the sweep tests nothing"
