"""The reliability tier's one requirement beyond Python: strace, for crash points and faults."""

from __future__ import annotations

import os
import shutil

import pytest

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


@pytest.fixture(scope="session")  # before the module fixtures that already trace
def strace_installed() -> None:
    """Skip locally, but fail in CI (CI=true), when strace is missing: CI must run the
    crash-point and I/O-fault tests it claims to run (`.ci/run` installs strace)."""
    if shutil.which("strace") is None:
        problem = "strace is not installed (Debian: apt-get install strace)"
        if IN_CI:
            pytest.fail(problem)
        pytest.skip(problem)
