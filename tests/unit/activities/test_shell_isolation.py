"""Isolated `shell` steps with real processes and real namespaces (`wovyr.activities.sandbox`,
`wovyr.activities.launcher`): what a step sees of the worker's processes and files, as whom
it runs, that nothing it starts outlives it, and that a worker that cannot isolate refuses
the step instead of running it beside the worker. The limits under isolation are in
test_shell_sandbox.py."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from tests.isolation import has_setpriv, marked, require_isolation, sandbox_python

from wovyr.activities.base import ActivityError
from wovyr.activities.builtin.shell import run_shell
from wovyr.activities.policy import RESTRICTED, SideEffectPolicy
from wovyr.activities.sandbox import LAUNCHER, ShellSandbox
from wovyr.definition.model import ShellSpec
from wovyr.files import process_folder
from wovyr.store import open_store
from wovyr.store.sqlite import SQLiteStore

ISOLATED = replace(RESTRICTED, shell=True, shell_env=("PATH",))  # a grant, as the host gives it
UNISOLATED = replace(ISOLATED, shell_isolation=False)
ROOT = os.geteuid() == 0


@pytest.fixture(autouse=True)
def _isolation() -> None:
    require_isolation()


def _shell(
    argv: list[str],
    policy: SideEffectPolicy = ISOLATED,
    *,
    sandbox: ShellSandbox | None = None,
    timeout: float = 20.0,
) -> dict[str, Any]:
    async def bounded() -> dict[str, Any]:
        async with asyncio.timeout(30):
            return await run_shell(
                ShellSpec(argv=argv), timeout=timeout, policy=policy, sandbox=sandbox
            )

    return asyncio.run(bounded())


def _failure(argv: list[str], policy: SideEffectPolicy = ISOLATED, **kwargs: Any) -> ActivityError:
    with pytest.raises(ActivityError) as caught:
        _shell(argv, policy, **kwargs)
    return caught.value


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A directory any user may read (outside pytest's private temp tree), with a key file:
    what the sandbox account could read if nothing hid it."""
    path = Path(tempfile.mkdtemp(prefix="wovyr-isolation-"))
    path.chmod(0o755)
    key = path / "kms-root.key"
    key.write_text("the-root-key\n")
    key.chmod(0o644)
    yield path
    for entry in path.iterdir():
        entry.unlink()
    path.rmdir()


@pytest.fixture
def marker() -> Iterator[str]:
    """A unique `sleep` argument to find the step's processes by; any left are killed."""
    mark = f"3600.{secrets.randbelow(10**9):09d}"
    yield mark
    for pid in marked(mark):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _until(check: Any, seconds: float = 5.0) -> Any:
    deadline = time.monotonic() + seconds
    while not (found := check()) and time.monotonic() < deadline:
        time.sleep(0.01)
    return found


# --- what the step sees ------------------------------------------------------------------


def test_an_isolated_step_sees_only_its_own_processes() -> None:
    listing = ["sh", "-c", "ls /proc | grep -E '^[0-9]+$' | sort -n | tr '\\n' ' '"]

    isolated = _shell(listing)["stdout"].split()
    beside = _shell(listing, UNISOLATED)["stdout"].split()

    # the namespace's first process, the program, and what the program started (ls, grep...)
    assert isolated[:2] == ["1", "2"] and len(isolated) <= 6, isolated
    assert str(os.getpid()) not in isolated
    assert str(os.getpid()) in beside  # unisolated, the worker (this test) is in plain view


def test_the_workers_environment_is_out_of_reach_of_an_isolated_step() -> None:
    worker = os.getpid()

    seen = _failure(["cat", f"/proc/{worker}/environ"])
    first = _failure(["cat", "/proc/1/environ"])  # the namespace's first process: not ours
    beside = _shell(["cat", f"/proc/{worker}/environ"], UNISOLATED)

    assert seen.type == "NonZeroExit" and "No such file" in seen.details["stderr"]
    assert first.type == "NonZeroExit" and "Permission denied" in first.details["stderr"]
    assert "PATH=" in beside["stdout"]  # what the isolation keeps out: this, from the worker


def test_hidden_paths_are_empty_and_the_rest_of_the_filesystem_is_not(shared_dir: Path) -> None:
    look = ["sh", "-c", f"ls -A {shared_dir}; cat {shared_dir}/kms-root.key; true"]

    hidden = _shell(look, sandbox=ShellSandbox(hide=(str(shared_dir),)))
    shown = _shell(look, sandbox=ShellSandbox())

    assert hidden["stdout"] == ""
    assert "No such file" in hidden["stderr"]
    assert shown["stdout"] == "kms-root.key\nthe-root-key\n"  # readable when not hidden


def test_the_sandbox_of_a_host_hides_its_home_and_its_database_directory(tmp_path: Path) -> None:
    home = tmp_path / "home"
    sandbox = ShellSandbox.of_host(home, f"sqlite:///{tmp_path}/db/wovyr.db", "nobody")
    postgres = ShellSandbox.of_host(home, "postgresql://u@db/w")

    assert sandbox.hide == (str(home), str(tmp_path / "db"))
    assert postgres.hide == (str(home),)
    assert ShellSandbox.of_host(home, f"sqlite:///{home}/wovyr.db").hide == (str(home),)


def test_the_sandbox_of_a_memory_store_hides_the_folder_of_its_files(tmp_path: Path) -> None:
    """A memory:// store is a SQLite file in this process's folder, which a step running as
    the worker's own uid (a user namespace) could read: isolated steps do not see it."""
    store = open_store("memory://")
    try:
        assert isinstance(store, SQLiteStore) and store.path.parent.parent == process_folder()
        sandbox = ShellSandbox.of_host(tmp_path / "home", "memory://")
        assert sandbox.hide == (str(tmp_path / "home"), str(process_folder()))
        look = ["sh", "-c", f"ls -A {process_folder()}; true"]

        hidden = _shell(look, sandbox=sandbox)
        shown = _shell(look, sandbox=ShellSandbox())
    finally:
        store.close()

    assert (hidden["stdout"], hidden["stderr"]) == ("", "")  # an empty folder in its place
    # unhidden: the store's folder is listed, or refused to the sandbox account of a root worker
    assert store.path.parent.name in shown["stdout"] or "Permission denied" in shown["stderr"]


@pytest.mark.skipif(not ROOT, reason="a worker that is not root runs steps as its own uid")
def test_on_a_root_worker_an_isolated_step_runs_as_the_sandbox_account() -> None:
    uid, gid = ShellSandbox().account()

    out = _shell(["sh", "-c", "id -u; id -g; id -G"])
    limited = _failure(["sh", "-c", "true & wait"], replace(ISOLATED, shell_processes=1))

    assert out["stdout"].split() == [str(uid), str(gid), str(gid)]
    # root is exempt from the process limit; the sandbox account is not
    assert limited.type == "NonZeroExit"
    assert "fork" in limited.details["stderr"].lower()


@pytest.mark.skipif(not ROOT, reason="the sandbox account is a root worker's")
@pytest.mark.parametrize(
    ("user", "says"),
    [("wovyr-no-such-account", "does not exist"), ("root", "is root"), ("0", "is root")],
)
def test_a_sandbox_account_that_does_not_exist_or_is_root_is_policy_denied(
    user: str, says: str
) -> None:
    error = _failure(["true"], sandbox=ShellSandbox(user=user))

    assert error.type == "PolicyDenied"
    assert user in error.message and says in error.message


# --- nothing it starts outlives it ---------------------------------------------------------


def test_a_process_that_left_the_group_dies_with_an_isolated_step(marker: str) -> None:
    escape = ["sh", "-c", f"setsid sleep {marker} >/dev/null 2>&1 & kill -0 $! && echo started"]

    beside = _shell(escape, UNISOLATED)
    survivors = _until(lambda: marked(marker))
    for pid in survivors:
        os.kill(pid, signal.SIGKILL)
    isolated = _shell(escape)

    assert beside["stdout"] == isolated["stdout"] == "started\n"
    assert survivors, "unisolated, the escaped sleep outlives the step (the known limit)"
    assert _until(lambda: not marked(marker)), "isolated, it died with the step"


def test_an_isolated_step_is_killed_whole_at_its_timeout(marker: str) -> None:
    async def run() -> ActivityError:
        spec = ShellSpec(argv=["sh", "-c", f"sleep {marker} & wait"])
        task = asyncio.ensure_future(run_shell(spec, timeout=3.0, policy=ISOLATED))
        while not marked(marker):  # bounded by the step's own timeout, then wait_for
            assert not task.done(), "the step ended before its sleep started"
            await asyncio.sleep(0.01)
        with pytest.raises(ActivityError) as caught:
            await task
        return caught.value

    error = asyncio.run(asyncio.wait_for(run(), 30))

    assert error.type == "Timeout"
    assert _until(lambda: not marked(marker)), "the sleep outlived the timeout"


# --- a worker that cannot isolate ------------------------------------------------------------

_CHILD = """\
import asyncio, json, sys
from dataclasses import replace
from wovyr.activities.base import ActivityError
from wovyr.activities.builtin.shell import run_shell
from wovyr.activities.policy import RESTRICTED
from wovyr.definition.model import ShellSpec
policy = replace(RESTRICTED, shell=True, shell_isolation=sys.argv[1] == "isolated")
try:
    out = asyncio.run(run_shell(ShellSpec(argv=["echo", "ran"]), timeout=20, policy=policy))
    print(json.dumps({"stdout": out["stdout"]}))
except ActivityError as exc:
    print(json.dumps({"type": exc.type, "retryable": exc.retryable, "message": exc.message}))
"""


def test_a_worker_without_the_capability_refuses_an_isolated_step() -> None:
    setpriv = has_setpriv()
    # a root worker without CAP_SYS_ADMIN, as in a container that dropped it
    capless = [setpriv, "--bounding-set=-sys_admin", "--inh-caps=-sys_admin"]

    def attempt(mode: str) -> dict[str, Any]:
        done = subprocess.run(
            [*capless, sys.executable, "-c", _CHILD, mode],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        )
        result: dict[str, Any] = json.loads(done.stdout)
        return result

    refused = attempt("isolated")
    accepted = attempt("unisolated")  # the host's administrator accepted unisolated shell

    assert refused["type"] == "PolicyDenied" and refused["retryable"] is False
    assert "cannot isolate" in refused["message"]
    assert "unshare" in refused["message"] and "EPERM" in refused["message"]
    assert "CAP_SYS_ADMIN" in refused["message"]
    assert accepted == {"stdout": "ran\n"}


@pytest.mark.skipif(not ROOT, reason="needs root to start the launcher as another user")
def test_a_worker_that_is_not_root_isolates_in_a_user_namespace(shared_dir: Path) -> None:
    # The launcher as a non-root worker would start it: as that user (nobody here), with
    # an interpreter it can run. The program runs as the same uid, in its own namespaces.
    python = sandbox_python()
    code = (
        "import os, resource; print(os.getuid());"
        "print(sorted(p for p in os.listdir('/proc') if p.isdigit()));"
        f"print(os.listdir({str(shared_dir)!r}));"
        "print(resource.getrlimit(resource.RLIMIT_CPU))"
    )
    job = {
        "program": python,
        "argv": [python, "-c", code],
        "env": {},
        "cwd": "/",
        "limits": [["RLIMIT_CPU", 5, 6]],
        "isolate": {"hide": [str(shared_dir)], "uid": None, "gid": None},
    }

    # The checkout may sit in a folder only its owner can enter (CI clones into mktemp -d):
    # a non-root worker runs its own installed copy, so "nobody" gets a copy it can read.
    readable = Path(tempfile.mkdtemp(prefix="wovyr-launcher-"))
    readable.chmod(0o755)
    launcher = readable / "launcher.py"
    launcher.write_bytes(Path(LAUNCHER).read_bytes())
    launcher.chmod(0o644)

    def launch(job: dict[str, Any]) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(
            [python, "-I", "-S", str(launcher)],
            input=json.dumps(job).encode(),
            capture_output=True,
            env={},
            user=65534,
            group=65534,
            extra_groups=[],
            timeout=60,
            check=False,
        )

    done = launch(job)
    spin = launch(
        {**job, "argv": [python, "-c", "while True: pass"], "limits": [["RLIMIT_CPU", 1, 2]]}
    )
    launcher.unlink()
    readable.rmdir()

    assert done.returncode == 0, done.stderr
    assert done.stdout.decode().splitlines() == ["65534", "['1', '2']", "[]", "(5, 6)"]
    # the program's end is the launcher's: killed by SIGXCPU, as a direct child would be
    assert spin.returncode == -signal.SIGXCPU


@pytest.mark.parametrize("report", ["isolation", "exec"])
@pytest.mark.parametrize("policy", [ISOLATED, UNISOLATED], ids=["isolated", "unisolated"])
def test_a_program_that_writes_what_looks_like_the_launchers_report_just_fails(
    report: str, policy: SideEffectPolicy
) -> None:
    forged = f"printf '\\000wovyr-shell-{report}-failed:[not json' >&2; exit 127"

    error = _failure(["sh", "-c", forged], policy)

    assert error.type == "NonZeroExit"
    assert error.details["exit_code"] == 127
