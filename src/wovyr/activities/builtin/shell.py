"""The `shell` kind: run one program (an argv list, never a shell).

The child runs in a session of its own, so on timeout or cancellation the whole process
group - grandchildren included - is killed, not just the program we started. Its
environment is built only from an allow-list: a worker's secrets do not leak into commands
by default. Output is capped but always drained, so a chatty child never blocks on a full
pipe.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import Field

from wovyr.activities.base import ActivityError, NonRetryableError
from wovyr.activities.kinds import ActivityKind, Dispatch, register_kind
from wovyr.fields import FrozenModel

__all__ = [
    "ERROR_EXCERPT_BYTES",
    "KIND",
    "TERM_GRACE_SECONDS",
    "ShellSpec",
    "ShellStep",
    "run_shell",
]


class ShellSpec(FrozenModel):
    argv: list[str] = Field(min_length=1, description="Program and arguments; no shell is used")
    cwd: str | None = None
    env: dict[str, str] = Field(default_factory=dict, description="Variables set for the process")
    inherit_env: list[str] = Field(
        default_factory=lambda: ["PATH"],
        description="Variables copied from the worker (allow-list)",
    )
    max_output_bytes: int = Field(default=1_048_576, ge=1, le=64 * 1_048_576)


class ShellStep(FrozenModel):
    shell: ShellSpec


ERROR_EXCERPT_BYTES = 2048
# How long a timed-out process group gets to exit on SIGTERM before SIGKILL.
TERM_GRACE_SECONDS = 0.5
# After the group is killed, how long to wait for the pipes to close. Only a process that
# left the group (setsid) and kept our pipes open can make this wait run out.
_PIPE_CLOSE_SECONDS = 2.0
_READ_CHUNK = 65536


@dataclass
class _Capture:
    """The first `limit` bytes of a stream; the rest is read and dropped."""

    limit: int
    data: bytearray = field(default_factory=bytearray)
    truncated: bool = False

    async def drain(self, stream: asyncio.StreamReader | None) -> None:
        if stream is None:
            return
        while chunk := await stream.read(_READ_CHUNK):
            room = self.limit - len(self.data)
            if len(chunk) > room:
                self.truncated = True
            if room > 0:
                self.data += chunk[:room]

    def text(self) -> str:
        return self.data.decode("utf-8", errors="replace")

    def tail(self, size: int) -> str:
        return self.data[-size:].decode("utf-8", errors="replace")


async def run_shell(
    spec: ShellSpec, *, timeout: float | None, environ: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """Run `spec.argv`; return `{exit_code, stdout, stderr, stdout_truncated, stderr_truncated}`.

    `environ` is where `spec.inherit_env` names are looked up (default: `os.environ`).
    A non-zero exit raises `ActivityError(type="NonZeroExit")`; the timeout raises
    `ActivityError(type="Timeout")` after killing the process group.
    """
    env = _child_environment(spec, os.environ if environ is None else environ)
    process = await _start(spec, env)
    stdout = _Capture(spec.max_output_bytes)
    stderr = _Capture(spec.max_output_bytes)
    try:
        exit_code = await _supervise(process, stdout, stderr, timeout)
    except TimeoutError:
        raise ActivityError(
            f"{spec.argv[0]} timed out after {timeout}s; its process group was killed",
            type="Timeout",
            retryable=True,
        ) from None
    if exit_code != 0:
        raise ActivityError(
            f"{spec.argv[0]} exited with code {exit_code}",
            type="NonZeroExit",
            retryable=True,
            # The end of stderr is where programs put the reason they failed.
            details={"exit_code": exit_code, "stderr": stderr.tail(ERROR_EXCERPT_BYTES)},
        )
    return {
        "exit_code": exit_code,
        "stdout": stdout.text(),
        "stderr": stderr.text(),
        "stdout_truncated": stdout.truncated,
        "stderr_truncated": stderr.truncated,
    }


def _child_environment(spec: ShellSpec, environ: Mapping[str, str]) -> dict[str, str]:
    """Only the allow-listed variables that exist in `environ`, then `spec.env` on top."""
    env = {name: environ[name] for name in spec.inherit_env if name in environ}
    env.update(spec.env)
    return env


async def _start(spec: ShellSpec, env: dict[str, str]) -> asyncio.subprocess.Process:
    """Spawn the child; if cancelled meanwhile, let the spawn finish and kill the group."""
    starting = asyncio.ensure_future(_spawn(spec, env))
    try:
        return await asyncio.shield(starting)
    except asyncio.CancelledError:
        await _kill_when_started(starting)
        raise


async def _kill_when_started(starting: asyncio.Future[asyncio.subprocess.Process]) -> None:
    # The child runs (and may fork) before asyncio has wired up its pipes; a cancelled spawn
    # would make asyncio kill the leader alone and orphan its children. (A second cancel
    # while we wait here still falls back to that.)
    try:
        process = await starting
    except ActivityError:
        return  # it never started
    _signal_group(process.pid, signal.SIGKILL)
    await _settle(process, _watch(process, _Capture(0), _Capture(0)))


async def _spawn(spec: ShellSpec, env: dict[str, str]) -> asyncio.subprocess.Process:
    program = spec.argv[0]
    try:
        return await asyncio.create_subprocess_exec(
            *spec.argv,
            cwd=spec.cwd,
            env=env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,  # own process group; unlike preexec_fn, thread-safe
        )
    except (FileNotFoundError, NotADirectoryError) as exc:
        # subprocess reports a failed chdir with the cwd as the filename.
        if spec.cwd is not None and exc.filename == spec.cwd:
            raise NonRetryableError(
                f"working directory not found: {spec.cwd}", type="CwdNotFound"
            ) from exc
        raise NonRetryableError(f"program not found: {program}", type="ProgramNotFound") from exc
    except PermissionError as exc:
        raise NonRetryableError(
            f"permission denied running {program}: {exc}", type="PermissionDenied"
        ) from exc
    except OSError as exc:  # e.g. EAGAIN when the host is out of processes: may pass later
        raise ActivityError(f"cannot start {program}: {exc}", type="SpawnFailed") from exc


async def _supervise(
    process: asyncio.subprocess.Process,
    stdout: _Capture,
    stderr: _Capture,
    timeout: float | None,
) -> int:
    """The exit code, once the process has exited and both pipes are closed.

    On timeout (TimeoutError is re-raised) or cancellation the process group is killed first.
    """
    finished = _watch(process, stdout, stderr)
    try:
        # Shielded so a timeout does not abandon the readers: after the kill they still have
        # to reach end-of-file, which is what closes the pipes cleanly.
        async with asyncio.timeout(timeout):
            return await asyncio.shield(finished)
    except TimeoutError:
        await _terminate_group(process)
        await _settle(process, finished)
        raise
    except asyncio.CancelledError:
        # No SIGTERM grace here: a second cancel could interrupt it and leave the group alive.
        _signal_group(process.pid, signal.SIGKILL)
        await _settle(process, finished)
        raise


def _watch(
    process: asyncio.subprocess.Process, stdout: _Capture, stderr: _Capture
) -> asyncio.Future[int]:
    """A task that ends with the exit code once both pipes are at end-of-file."""
    readers = asyncio.gather(stdout.drain(process.stdout), stderr.drain(process.stderr))
    return asyncio.ensure_future(_wait_all(readers, process))


async def _wait_all(readers: asyncio.Future[Any], process: asyncio.subprocess.Process) -> int:
    await readers
    return await process.wait()


async def _terminate_group(process: asyncio.subprocess.Process) -> None:
    _signal_group(process.pid, signal.SIGTERM)
    try:
        async with asyncio.timeout(TERM_GRACE_SECONDS):
            await process.wait()
    except TimeoutError:
        pass
    # Always: the leader may have exited on SIGTERM while a grandchild ignored it.
    _signal_group(process.pid, signal.SIGKILL)


async def _settle(process: asyncio.subprocess.Process, finished: asyncio.Future[int]) -> None:
    """Give the readers and the reaper a bounded time to finish after the kill."""
    try:
        async with asyncio.timeout(_PIPE_CLOSE_SECONDS):
            await asyncio.shield(finished)
    except TimeoutError:
        finished.cancel()
        # A process that escaped the group still holds our pipes open. Close our ends now:
        # left to the garbage collector they would leak (and warn) for the worker's lifetime.
        # asyncio offers no public way from a Process to its transport.
        transport: asyncio.SubprocessTransport | None = getattr(process, "_transport", None)
        if transport is not None:
            transport.close()


def _signal_group(pgid: int, signum: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):  # the whole group has already exited
        os.killpg(pgid, signum)


async def _execute(step: ShellStep, rendered: Any, dispatch: Dispatch) -> Any:
    return await run_shell(ShellSpec.model_validate(rendered), timeout=dispatch.timeout)


KIND = register_kind(
    ActivityKind(
        name="shell",
        model=ShellStep,
        spec=lambda step: step.shell.model_dump(mode="json", exclude_none=True),
        execute=_execute,
        description="one program, run without a shell",
    )
)
