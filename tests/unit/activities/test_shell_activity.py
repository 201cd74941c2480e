"""The `shell` activity with real processes: capture, caps, env allow-list, group kill."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import time
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any

import pytest

from wovyr.activities.base import ActivityError
from wovyr.activities.builtin import shell
from wovyr.activities.builtin.shell import run_shell
from wovyr.definition.model import ShellSpec

PY = sys.executable
# A grandchild that survives SIGTERM: only a SIGKILL sent to the group ends it.
STUBBORN = (
    "import os, signal, sys, time;"
    "signal.signal(signal.SIGTERM, signal.SIG_IGN);"
    "open(sys.argv[1], 'w').write(str(os.getpid()));"
    "time.sleep(30)"
)


def _run(coro: Coroutine[Any, Any, dict[str, Any]]) -> dict[str, Any]:
    async def bounded() -> dict[str, Any]:
        async with asyncio.timeout(30):
            return await coro

    return asyncio.run(bounded())


def _shell(argv: list[str], *, timeout: float | None = 10.0, **fields: Any) -> dict[str, Any]:
    return _run(run_shell(ShellSpec(argv=argv, **fields), timeout=timeout))


def _failure(argv: list[str], *, timeout: float | None = 10.0, **fields: Any) -> ActivityError:
    with pytest.raises(ActivityError) as caught:
        _shell(argv, timeout=timeout, **fields)
    return caught.value


def _is_gone(pid: int) -> bool:
    """Dead or a zombie: an orphan's reaper (PID 1 in a container) may be slow or absent."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


def _wait_gone(pid: int, within: float = 5.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if _is_gone(pid):
            return True
        time.sleep(0.01)
    return _is_gone(pid)


def _read_pid(pidfile: Path) -> int:
    text = pidfile.read_text().strip()
    assert text, "the grandchild never reported its pid"
    return int(text)


@pytest.fixture
def pidfile(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "grandchild.pid"
    yield path
    # A failing test must not leave its sleeper behind.
    if path.exists() and path.read_text().strip():
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(path.read_text()), signal.SIGKILL)


def test_stdout_stderr_and_exit_code_are_captured() -> None:
    code = "import sys; print('out'); print('err', file=sys.stderr)"

    out = _shell([PY, "-c", code])

    assert out == {
        "exit_code": 0,
        "stdout": "out\n",
        "stderr": "err\n",
        "stdout_truncated": False,
        "stderr_truncated": False,
    }


def test_arguments_are_not_interpreted_by_a_shell() -> None:
    out = _shell([PY, "-c", "import sys; print(sys.argv[1])", "$HOME; echo hacked"])

    assert out["stdout"] == "$HOME; echo hacked\n"


def test_runs_in_cwd_with_stdin_closed(tmp_path: Path) -> None:
    code = "import os, sys; print(os.getcwd()); print(repr(sys.stdin.read()))"

    out = _shell([PY, "-c", code], cwd=str(tmp_path))

    assert out["stdout"].splitlines() == [str(tmp_path.resolve()), "''"]


def test_non_zero_exit_is_a_retryable_failure_with_stderr() -> None:
    code = "import sys; sys.stderr.write('x' * 5000 + 'the reason'); sys.exit(3)"

    error = _failure([PY, "-c", code])

    assert error.type == "NonZeroExit"
    assert error.retryable is True
    assert error.details["exit_code"] == 3
    assert error.details["stderr"].endswith("the reason")
    assert len(error.details["stderr"]) == 2048


def test_environment_is_only_the_allow_list_plus_env() -> None:
    environ = {"PATH": os.environ["PATH"], "KEEP": "kept", "SECRET": "hunter2"}
    spec = ShellSpec(argv=["env"], inherit_env=["PATH", "KEEP", "ABSENT"], env={"EXTRA": "e"})

    out = _run(run_shell(spec, timeout=10.0, environ=environ))

    seen = dict(line.split("=", 1) for line in out["stdout"].splitlines())
    assert seen == {"PATH": os.environ["PATH"], "KEEP": "kept", "EXTRA": "e"}


def test_environment_defaults_to_the_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WOVYR_TEST_SHARED", "shared")
    monkeypatch.setenv("WOVYR_TEST_PRIVATE", "private")

    out = _shell(["env"], inherit_env=["PATH", "WOVYR_TEST_SHARED"])

    assert "WOVYR_TEST_SHARED=shared" in out["stdout"].splitlines()
    assert "WOVYR_TEST_PRIVATE" not in out["stdout"]


def test_output_is_capped_while_the_child_runs_to_completion() -> None:
    # 10 MB on each pipe: a reader that stopped at the cap would leave the child blocked.
    code = (
        "import sys; sys.stdout.write('a' * 10_000_000); sys.stderr.write('b' * 10_000_000);"
        "sys.stdout.flush(); print('done', file=sys.stderr)"
    )

    out = _shell([PY, "-c", code], max_output_bytes=1000)

    assert out["exit_code"] == 0
    assert out["stdout"] == "a" * 1000
    assert out["stderr"] == "b" * 1000
    assert out["stdout_truncated"] is True
    assert out["stderr_truncated"] is True


def test_timeout_kills_the_grandchild(pidfile: Path) -> None:
    # The sleep outlasts the test's own timeout: had the activity waited for it, the test
    # fails there; gone afterwards means killed.
    script = f"sleep 3600 & echo $! > {pidfile}; wait"

    error = _failure(["sh", "-c", script], timeout=1.0)

    assert error.type == "Timeout"
    assert error.retryable is True
    assert _wait_gone(_read_pid(pidfile)), "the backgrounded sleep outlived the timeout"


def test_timeout_kills_a_grandchild_that_ignores_sigterm(pidfile: Path) -> None:
    script = f'"$0" -c "$1" {pidfile} & wait'

    error = _failure(["sh", "-c", script, PY, STUBBORN], timeout=2.0)

    assert error.type == "Timeout"
    assert _wait_gone(_read_pid(pidfile)), "SIGKILL never reached the process group"


def test_a_process_that_left_the_group_cannot_hold_the_activity_open(
    pidfile: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The escapee keeps our pipes open and survives the group kill: the activity must still
    # end (Timeout) soon after its deadline, with its pipes closed (no ResourceWarning).
    monkeypatch.setattr(shell, "_PIPE_CLOSE_SECONDS", 0.2)
    escapee = STUBBORN.replace("signal.signal(", "os.setsid(); signal.signal(")
    script = f'"$0" -c "$1" {pidfile} &'

    error = _failure(["sh", "-c", script, PY, escapee], timeout=2.0)

    assert error.type == "Timeout"
    # It really escaped, and is still alive (it sleeps 30 s): the activity did not wait for
    # it to let go of the pipes. The fixture kills it.
    assert not _is_gone(_read_pid(pidfile))


def test_cancellation_kills_the_group_and_propagates(pidfile: Path) -> None:
    async def cancel_once_started() -> None:
        spec = ShellSpec(argv=["sh", "-c", f"sleep 30 & echo $! > {pidfile}; wait"])
        task = asyncio.create_task(run_shell(spec, timeout=None))
        while not (pidfile.exists() and pidfile.read_text().strip()):
            await asyncio.sleep(0.01)  # bounded by the test's outer timeout
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(asyncio.wait_for(cancel_once_started(), 10))

    assert _wait_gone(_read_pid(pidfile)), "the sleep outlived the cancelled activity"


def test_cancellation_while_asyncio_is_still_starting_the_child_kills_the_group(
    pidfile: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The child runs (and forks) before asyncio has finished wiring its pipes. Hold the
    # spawn in that state, cancel there, and the grandchild must still die.
    real_spawn = asyncio.create_subprocess_exec
    released = asyncio.Event()

    async def slow_to_return(*args: Any, **kwargs: Any) -> asyncio.subprocess.Process:
        process = await real_spawn(*args, **kwargs)
        await released.wait()
        return process

    monkeypatch.setattr(asyncio, "create_subprocess_exec", slow_to_return)

    async def cancel_mid_spawn() -> None:
        spec = ShellSpec(argv=["sh", "-c", f"sleep 30 & echo $! > {pidfile}; wait"])
        task = asyncio.create_task(run_shell(spec, timeout=None))
        while not (pidfile.exists() and pidfile.read_text().strip()):
            await asyncio.sleep(0.01)  # bounded by the outer wait_for
        task.cancel()
        released.set()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(asyncio.wait_for(cancel_mid_spawn(), 10))

    assert _wait_gone(_read_pid(pidfile)), "the sleep outlived the cancelled spawn"


def test_missing_program_is_not_retryable() -> None:
    error = _failure(["wovyr-no-such-program-x"])

    assert error.type == "ProgramNotFound"
    assert error.retryable is False


def test_missing_cwd_is_not_retryable(tmp_path: Path) -> None:
    error = _failure([PY, "-c", "pass"], cwd=str(tmp_path / "missing"))

    assert error.type == "CwdNotFound"
    assert error.retryable is False


def test_a_program_given_by_relative_path_is_found_in_a_relative_cwd(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "sub").mkdir()
    script = tmp_path / "sub" / "hello"
    script.write_text("#!/bin/sh\necho hello from sub\n")
    script.chmod(0o755)
    monkeypatch.chdir(tmp_path)

    out = _shell(["./hello"], cwd="sub")

    assert out["stdout"] == "hello from sub\n"
