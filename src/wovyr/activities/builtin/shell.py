"""The `shell` kind: run one program (an argv list, never a shell), inside a sandbox.

Every attempt is checked against the `SideEffectPolicy` it is dispatched with before anything
starts: `shell` off, a `cwd` where the policy gives none, or a program outside
`shell_commands` is `PolicyDenied` (non-retryable). Then the program runs:

- with an environment built only from the definition's `env` plus the `inherit_env` names
  the policy's `shell_env` admits - never the worker's environment as a whole;
- in a fresh, private working directory made for the attempt and removed after it (unless
  the step names a `cwd` and the policy allows that);
- in a session of its own, so on timeout or cancellation the whole process group -
  grandchildren included - is killed, not just the program we started;
- under the policy's rlimits (CPU seconds, address space, open files, processes, file size).
  They are set by a tiny launcher (`wovyr.activities.launcher`: `python -I -S`, started with
  an empty environment, handed its job on stdin) that calls `setrlimit` and then `execve`s
  the program: no `preexec_fn` (unsafe in a worker that runs tools in threads) and no
  external `prlimit` (not on every host; and a dynamically linked helper started with the
  step's environment would let an `LD_PRELOAD` run before the limits are set);
- isolated, when the policy says `shell_isolation` (every grant of shell to a tenant unless
  the host's administrator said otherwise): the launcher runs the program in new mount and
  PID namespaces, with a fresh `/proc`, the worker's home and database hidden, and as the
  sandbox account on a root worker (`wovyr.activities.sandbox`). A worker that cannot
  isolate refuses the attempt (`PolicyDenied`) rather than run it unisolated.

Output is capped but always drained, so a chatty child never blocks on a full pipe.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shlex
import shutil
import signal
import sys
import tempfile
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from wovyr.activities.base import ActivityError, NonRetryableError
from wovyr.activities.dispatch import Dispatch
from wovyr.activities.kinds import ActivityKind, StepProblem, register_kind
from wovyr.activities.launcher import EXEC_FAILED
from wovyr.activities.policy import TRUSTED, SideEffectPolicy
from wovyr.activities.sandbox import LAUNCHER, ShellSandbox, isolation_refusal
from wovyr.activities.shown import redact_shell
from wovyr.kinds.steps import SHELL, ShellSpec, ShellStep

if TYPE_CHECKING:
    import asyncio

__all__ = [
    "ERROR_EXCERPT_BYTES",
    "KIND",
    "POLICY_DENIED",
    "TERM_GRACE_SECONDS",
    "ShellSpec",
    "ShellStep",
    "run_shell",
]


ERROR_EXCERPT_BYTES = 2048
# The error type of every policy refusal (not retryable: the same attempt would be refused).
POLICY_DENIED = "PolicyDenied"
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
    spec: ShellSpec,
    *,
    timeout: float | None,
    environ: Mapping[str, str] | None = None,
    policy: SideEffectPolicy = TRUSTED,
    sandbox: ShellSandbox | None = None,
) -> dict[str, Any]:
    """Run `spec.argv` under `policy`; return `{exit_code, stdout, stderr, stdout_truncated,
    stderr_truncated}`.

    `environ` is the worker's environment (default: `os.environ`): where `spec.inherit_env`
    names are looked up, and whose PATH finds a bare program name under a command allow-list.
    `sandbox` is what an isolated step does not see (default: nothing beyond the worker's
    processes). A policy refusal raises `ActivityError(type="PolicyDenied",
    retryable=False)` before anything starts; so does a worker that cannot isolate a step
    its policy isolates. A non-zero exit raises `ActivityError(type="NonZeroExit")`; the
    timeout raises `ActivityError(type="Timeout")` after killing the process group.
    """
    worker_env = os.environ if environ is None else environ
    _check_input(spec)
    _check_allowed(spec, policy)
    env = _child_environment(spec, worker_env, policy)
    isolate = (sandbox or ShellSandbox()).job() if policy.shell_isolation else None
    owner = None if isolate is None or isolate["uid"] is None else (isolate["uid"], isolate["gid"])
    async with _working_directory(spec, owner) as cwd:
        program = _resolve_program(spec.argv[0], env, cwd, worker_env, policy)
        launch = _Launch(spec.argv, program, env, cwd, _limits(policy), isolate)
        process = await _start(launch)
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
        raise _exit_error(spec, launch, exit_code, stderr)
    return {
        "exit_code": exit_code,
        "stdout": stdout.text(),
        "stderr": stderr.text(),
        "stdout_truncated": stdout.truncated,
        "stderr_truncated": stderr.truncated,
    }


def _denied(message: str, allow: str | None = None) -> NonRetryableError:
    """A policy refusal; `allow`: the `wovyr admin tenants set` flags that would allow it
    (in `details`, for the worker to name the command with the tenant)."""
    return NonRetryableError(
        message, type=POLICY_DENIED, details={"allow": allow} if allow else None
    )


def _check_input(spec: ShellSpec) -> None:
    """What no exec accepts: fails every attempt alike, so it is not retried."""
    problems = [f"argv[{i}] contains a NUL byte" for i, arg in enumerate(spec.argv) if "\0" in arg]
    for name, value in spec.env.items():
        if not name or "=" in name or "\0" in name:
            problems.append(f"env name {name!r} is not a variable name")
        elif "\0" in value:
            problems.append(f"env {name} contains a NUL byte")
    if problems:
        raise NonRetryableError("; ".join(problems), type="InvalidActivityInput")


def _check_allowed(spec: ShellSpec, policy: SideEffectPolicy) -> None:
    if not policy.shell:
        raise _denied(
            "activity kind `shell` is not allowed by the side-effect policy "
            "(shell: false); an admin must allow shell for this tenant",
            "--shell",
        )
    if spec.cwd is not None and not policy.shell_cwd:
        raise _denied(
            f"`shell` may not choose its working directory ({spec.cwd!r}): the side-effect "
            "policy runs shell steps only in their fresh per-attempt directory (shell_cwd: false)",
            "--shell-cwd",
        )
    if policy.shell_commands is not None:
        loader = sorted(name for name in spec.env if name.startswith("LD_"))
        if loader:
            raise _denied(
                f"`shell` may not set {', '.join(loader)} under a command allow-list "
                "(the side-effect policy's shell_commands)",
                "--any-command",
            )


def _child_environment(
    spec: ShellSpec, environ: Mapping[str, str], policy: SideEffectPolicy
) -> dict[str, str]:
    """The `inherit_env` names the policy admits that exist in `environ`, then `spec.env`."""
    admitted = policy.shell_env
    env = {
        name: environ[name]
        for name in spec.inherit_env
        if name in environ and (admitted is None or name in admitted)
    }
    env.update(spec.env)
    return env


@contextlib.asynccontextmanager
async def _working_directory(
    spec: ShellSpec, owner: tuple[int, int] | None = None
) -> AsyncIterator[str]:
    """The step's own `cwd` (checked to exist), or a fresh private directory removed after
    (given to `owner`, the uid and gid an isolated step runs as, when there is one)."""
    import asyncio  # by the first run, not by importing the kind

    if spec.cwd is not None:
        if not os.path.isdir(spec.cwd):
            raise NonRetryableError(f"working directory not found: {spec.cwd}", type="CwdNotFound")
        yield spec.cwd
        return
    fresh = tempfile.mkdtemp(prefix="wovyr-shell-")
    try:
        if owner is not None:
            os.chown(fresh, *owner)
        yield fresh
    finally:
        # Off the event loop (a step may leave many files); shielded so a second cancel
        # does not stop the removal, which the thread finishes anyway.
        await asyncio.shield(asyncio.to_thread(shutil.rmtree, fresh, ignore_errors=True))


def _resolve_program(
    argv0: str,
    env: Mapping[str, str],
    cwd: str,
    worker_env: Mapping[str, str],
    policy: SideEffectPolicy,
) -> str:
    """The path that will be executed; checked against `policy.shell_commands`.

    A name with a `/` is taken relative to the working directory. A bare name is looked up
    on the step's PATH - except under a command allow-list, where it is looked up on the
    worker's PATH so a definition cannot point an allowed name at another program.
    """
    commands = policy.shell_commands
    if "/" in argv0:
        program = os.path.normpath(os.path.join(os.path.abspath(cwd), argv0))
    else:
        source = env if commands is None else worker_env
        found = shutil.which(argv0, path=source.get("PATH", os.defpath))
        if found is None:
            raise NonRetryableError(f"program not found: {argv0}", type="ProgramNotFound")
        program = os.path.normpath(os.path.abspath(found))
    if commands is not None:
        paths = {os.path.normpath(entry) for entry in commands if "/" in entry}
        if not (("/" not in argv0 and argv0 in commands) or program in paths):
            raise _denied(
                f"`shell` may not run {argv0!r} ({program}): it is not in the side-effect "
                "policy's command allow-list (shell_commands)",
                " ".join(f"--shell-command {shlex.quote(c)}" for c in (*commands, program)),
            )
    return program


# RLIMIT name, the policy field; CPU gets a hard limit one second above the soft one, so a
# program is first sent SIGXCPU (reported as CpuLimitExceeded) and SIGKILLed if it ignores it.
_RLIMITS = (
    ("RLIMIT_CPU", "shell_cpu_seconds"),
    ("RLIMIT_AS", "shell_memory_bytes"),
    ("RLIMIT_NOFILE", "shell_open_files"),
    ("RLIMIT_NPROC", "shell_processes"),
    ("RLIMIT_FSIZE", "shell_file_bytes"),
)


def _limits(policy: SideEffectPolicy) -> list[tuple[str, int, int]]:
    limits: list[tuple[str, int, int]] = []
    for name, attribute in _RLIMITS:
        value: int | None = getattr(policy, attribute)
        if value is not None:
            limits.append((name, value, value + 1 if name == "RLIMIT_CPU" else value))
    return limits


@dataclass(frozen=True)
class _Launch:
    argv: list[str]
    program: str  # what is executed (argv[0] is passed as written)
    env: dict[str, str]
    cwd: str
    limits: list[tuple[str, int, int]]  # (RLIMIT name, soft, hard)
    isolate: dict[str, Any] | None = None  # the sandbox (`ShellSandbox.job`); None: none

    @property
    def launched(self) -> bool:
        """Whether the launcher starts the program (else the worker does, directly)."""
        return bool(self.limits) or self.isolate is not None

    def job(self) -> bytes:
        return json.dumps(
            {
                "program": self.program,
                "argv": self.argv,
                "env": self.env,
                "cwd": self.cwd,
                "limits": self.limits,
                "isolate": self.isolate,
            }
        ).encode()


def _exit_error(
    spec: ShellSpec, launch: _Launch, exit_code: int, stderr: _Capture
) -> ActivityError:
    program = spec.argv[0]
    if launch.launched and exit_code == 127:
        failed = _exec_failure(stderr.text())
        if failed is not None:
            return _spawn_error(program, failed)
        refused = isolation_refusal(stderr.text())
        if refused is not None:
            return refused
    if exit_code == -signal.SIGXCPU:
        return NonRetryableError(
            f"{program} was killed at its CPU time limit ({_cpu_text(launch)})",
            type="CpuLimitExceeded",
            details={"exit_code": exit_code, "signal": "SIGXCPU"},
        )
    if exit_code == -signal.SIGXFSZ:
        return NonRetryableError(
            f"{program} was killed writing past its file size limit",
            type="FileSizeLimitExceeded",
            details={"exit_code": exit_code, "signal": "SIGXFSZ"},
        )
    details: dict[str, Any] = {"exit_code": exit_code, "stderr": stderr.tail(ERROR_EXCERPT_BYTES)}
    if exit_code < 0:
        details["signal"] = signal.Signals(-exit_code).name
    return ActivityError(
        f"{program} exited with code {exit_code}",
        type="NonZeroExit",
        retryable=True,
        # The end of stderr is where programs put the reason they failed.
        details=details,
    )


def _exec_failure(stderr: str) -> OSError | None:
    """The launcher's report of an exec that failed (None: the program ran, or wrote
    something that only looks like the report)."""
    if not stderr.startswith(EXEC_FAILED):
        return None
    try:
        code, text = json.loads(stderr[len(EXEC_FAILED) :])
        return OSError(int(code), str(text))
    except (TypeError, ValueError):
        return None


def _cpu_text(launch: _Launch) -> str:
    seconds = next((soft for name, soft, _ in launch.limits if name == "RLIMIT_CPU"), None)
    return "the worker's own" if seconds is None else f"{seconds} s"


async def _start(launch: _Launch) -> asyncio.subprocess.Process:
    """Spawn the child; if cancelled meanwhile, let the spawn finish and kill the group."""
    import asyncio  # by the first run, not by importing the kind

    starting = asyncio.ensure_future(_spawn(launch))
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


async def _spawn(launch: _Launch) -> asyncio.subprocess.Process:
    import asyncio  # by the first run, not by importing the kind

    program = launch.argv[0]
    pipes: dict[str, Any] = {
        "stdout": asyncio.subprocess.PIPE,
        "stderr": asyncio.subprocess.PIPE,
        "cwd": launch.cwd,
        "start_new_session": True,  # own process group; unlike preexec_fn, thread-safe
    }
    if not launch.launched:
        try:
            return await asyncio.create_subprocess_exec(
                *launch.argv,
                executable=launch.program,
                env=launch.env,
                stdin=asyncio.subprocess.DEVNULL,
                **pipes,
            )
        except OSError as exc:
            raise _spawn_error(program, exc) from exc
    try:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-I",
            "-S",
            LAUNCHER,
            env={},
            stdin=asyncio.subprocess.PIPE,
            **pipes,
        )
    except OSError as exc:  # the worker's own interpreter: e.g. EAGAIN, out of processes
        raise ActivityError(
            f"cannot start the launcher ({sys.executable}) for {program}: {exc}",
            type="SpawnFailed",
        ) from exc
    stdin = process.stdin
    assert stdin is not None
    # If the launcher died early its exit status tells why; the write's failure adds nothing.
    with contextlib.suppress(ConnectionError):
        stdin.write(launch.job())
        await stdin.drain()
    stdin.close()
    with contextlib.suppress(ConnectionError):
        await stdin.wait_closed()
    return process


def _spawn_error(program: str, exc: OSError) -> ActivityError:
    if exc.errno in (errno.ENOENT, errno.ENOTDIR):
        return NonRetryableError(f"program not found: {program}", type="ProgramNotFound")
    if exc.errno in (errno.EACCES, errno.EPERM):
        return NonRetryableError(
            f"permission denied running {program}: {exc}", type="PermissionDenied"
        )
    # e.g. EAGAIN when the host is out of processes: may pass later
    return ActivityError(f"cannot start {program}: {exc}", type="SpawnFailed")


async def _supervise(
    process: asyncio.subprocess.Process,
    stdout: _Capture,
    stderr: _Capture,
    timeout: float | None,
) -> int:
    """The exit code, once the process has exited and both pipes are closed.

    On timeout (TimeoutError is re-raised) or cancellation the process group is killed first.
    """
    import asyncio  # by the first run, not by importing the kind

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
    import asyncio  # by the first run, not by importing the kind

    readers = asyncio.gather(stdout.drain(process.stdout), stderr.drain(process.stderr))
    return asyncio.ensure_future(_wait_all(readers, process))


async def _wait_all(readers: asyncio.Future[Any], process: asyncio.subprocess.Process) -> int:
    await readers
    return await process.wait()


async def _terminate_group(process: asyncio.subprocess.Process) -> None:
    import asyncio  # by the first run, not by importing the kind

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
    import asyncio  # by the first run, not by importing the kind

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
    return await run_shell(
        ShellSpec.model_validate(rendered),
        timeout=dispatch.timeout,
        policy=dispatch.policy,
        sandbox=dispatch.sandbox,
    )


def _admits(step: ShellStep, policy: SideEffectPolicy) -> list[StepProblem]:
    """What `policy` refuses of this step, known before it runs (the rest - a program
    named by an expression, one found on PATH - is checked by `run_shell` at dispatch)."""
    spec = step.shell
    if not policy.shell:
        return [StepProblem(("shell",), "`shell` is not allowed (shell: false)", "--shell")]
    found: list[StepProblem] = []
    if spec.cwd is not None and not policy.shell_cwd:
        found.append(
            StepProblem(
                ("shell", "cwd"),
                "a shell step may not choose its cwd (shell_cwd: false)",
                "--shell-cwd",
            )
        )
    commands = policy.shell_commands
    argv0 = spec.argv[0]
    if commands is not None and "${{" not in argv0:
        paths = {os.path.normpath(entry) for entry in commands if "/" in entry}
        if "/" not in argv0:
            refused = argv0 not in commands
        else:  # a relative path is only known in the attempt's directory
            refused = argv0.startswith("/") and os.path.normpath(argv0) not in paths
        if refused:
            allowed = " ".join(f"--shell-command {shlex.quote(c)}" for c in (*commands, argv0))
            found.append(
                StepProblem(("shell", "argv"), f"{argv0!r} is not in shell_commands", allowed)
            )
    if commands is not None and any(name.startswith("LD_") for name in spec.env):
        found.append(
            StepProblem(
                ("shell", "env"), "LD_* variables under a command allow-list", "--any-command"
            )
        )
    return found


KIND = register_kind(
    ActivityKind.of(
        SHELL,
        execute=_execute,
        side_effects=True,
        admits=_admits,
        redact=redact_shell,
        needs=frozenset({"sandbox"}),
    )
)
