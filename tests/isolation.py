"""What tests of isolated `shell` steps need of this machine (`wovyr.activities.sandbox`).

An isolated step on a root worker runs as the sandbox account (`nobody`): it must be able to
run its program, and an interpreter installed under a private home (a pyenv under /root) is
out of its reach. `sandbox_python()` finds one it can run. Each need is checked once.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from tests.conftest import IN_CI

from wovyr.activities.sandbox import LAUNCHER, ShellSandbox, probe

_CANDIDATES = (sys.executable, "/usr/bin/python3", "/usr/local/bin/python3")


@functools.cache
def unavailable() -> str | None:
    """Why this machine cannot isolate a shell step (None: it can)."""
    return probe(ShellSandbox())


def require_isolation() -> None:
    """Skip (locally) or fail (CI=true: CI must test the isolation) where it is unavailable."""
    reason = unavailable()
    if reason is None:
        return
    if IN_CI:
        pytest.fail(f"shell isolation must be testable in CI: {reason}")
    pytest.skip(f"this machine cannot isolate shell steps: {reason}")


@functools.cache
def _runnable_python() -> str | None:
    for candidate in dict.fromkeys(c for c in _CANDIDATES if c and os.path.exists(c)):
        job = {
            "program": candidate,
            "argv": [candidate, "-c", "print('ok')"],
            "env": {},
            "cwd": "/",
            "limits": [],
            "isolate": ShellSandbox().job(),
        }
        done = subprocess.run(
            [sys.executable, "-I", "-S", LAUNCHER],
            input=json.dumps(job).encode(),
            capture_output=True,
            env={},
            timeout=30,
            check=False,
        )
        if done.stdout == b"ok\n":
            return candidate
    return None


def sandbox_python() -> str:
    """An interpreter an isolated step can run here (skip or fail without one)."""
    require_isolation()
    found = _runnable_python()
    if found is None:
        reason = f"no Python the sandbox account can run among {list(_CANDIDATES)}"
        if IN_CI:
            pytest.fail(reason)
        pytest.skip(reason)
    return found


def marked(marker: str) -> list[int]:
    """The host's pids of the processes with `marker` in their command line."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:  # gone meanwhile, or not ours to read
            continue
        if marker.encode() in cmdline and not _zombie(entry):
            found.append(int(entry.name))
    return found


def _zombie(entry: Path) -> bool:
    try:
        return entry.joinpath("stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


def has_setpriv() -> str:
    """`setpriv` (util-linux), to start a process without a capability (skip without it)."""
    found = shutil.which("setpriv")
    if found is None or os.geteuid() != 0:
        pytest.skip("needs root and setpriv to start a worker without CAP_SYS_ADMIN")
    return found
