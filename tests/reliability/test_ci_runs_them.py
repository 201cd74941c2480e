"""CI runs the strace-based tests it claims to run: `.ci/run` installs strace, and with
CI=true a missing strace fails those tests instead of skipping them (as PostgreSQL does)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # like the rest of this tier (it starts pytest twice)

REPO = Path(__file__).resolve().parents[2]
# Four tests (the second is parametrized twice); without strace, their fixture decides
# before they do anything.
STRACE_TESTS = [
    "tests/reliability/test_crash_points.py::test_sqlite_crash_points",
    "tests/reliability/test_io_faults.py::test_fsync_eio_is_an_error_and_the_store_recovers_in_process",
    "tests/reliability/test_handover_crash.py::test_a_kill_at_any_write_of_the_hand_over_leaves_one_live_run",
]


def test_ci_installs_strace_when_it_is_missing() -> None:
    script = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert re.search(r"command -v strace\b.*\|\| missing\+=\(strace\)", script), script
    assert 'apt-get install -y -qq "${missing[@]}"' in script


@pytest.mark.parametrize("ci", ["true", ""])
def test_without_strace_the_tests_fail_in_ci_and_skip_elsewhere(ci: str, tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"  # a PATH with Python on it and no strace
    bin_dir.mkdir()
    (bin_dir / "python").symlink_to(sys.executable)
    env = {**os.environ, "PATH": str(bin_dir), "CI": ci}
    ran = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rfEs", *STRACE_TESTS],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    summary = ran.stdout.strip().splitlines()[-1]
    assert "strace is not installed" in ran.stdout, ran.stdout
    if ci:
        assert ran.returncode == 1, ran.stdout
        assert "4 errors" in summary and "skipped" not in summary, summary
    else:
        assert ran.returncode == 0, ran.stdout
        assert "4 skipped" in summary, summary
