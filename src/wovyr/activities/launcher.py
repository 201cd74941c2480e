"""The launcher: the small program between a worker and a `shell` step's program.

The worker starts it as `python -I -S launcher.py` (no site, no environment: nothing the
step chose runs before the limits are set) and writes its job, one JSON object, to its
stdin: `program` (the path executed), `argv`, `env`, `cwd`, `limits` (`[RLIMIT name, soft,
hard]`, each only ever lowered) and `isolate` (null, or the sandbox below). It puts
`/dev/null` on stdin, lowers the limits, resets the signal dispositions Python changed, and
`execve`s the program. An exec that fails is reported on stderr after `EXEC_FAILED`.

**Isolated** (`isolate` given; `wovyr.activities.sandbox` builds it), before the exec:

- it enters new mount and PID namespaces: as root directly, then the program runs as the
  sandbox account (`uid`, `gid`); as any other user inside a new user namespace that maps
  only its own uid and gid, so the program holds no capability there;
- it forks the PID namespace's first process (PID 1: it reaps orphans and ends with the
  program, and the kernel then kills whatever else is left in the namespace: nothing the
  program started outlives it, not even a process that left the group with `setsid`);
- that process makes every mount private, covers each path of `hide` with an empty,
  read-only tmpfs, mounts a fresh `/proc` (the namespace's processes only: not the
  worker's, not the host's), and forks the program (PID 2: the kernel's special treatment of
  PID 1 would swallow the SIGXCPU and SIGXFSZ of its limits), which changes into `cwd` again
  (a directory held from before the mounts could reach under them), switches user, sets
  `no_new_privs` (a set-user-ID program gains nothing) and execs as above;
- the launcher itself ignores SIGTERM (the program gets it from the group kill; the
  launcher waits for it to exit, as the program would have been waited for) and ends the
  way the program ended: the same exit code, or the same signal (raised on itself), so the
  worker sees what it would have seen without the namespaces.

A step of the isolation that fails (no user namespaces, no `CAP_SYS_ADMIN`, a mount
refused) is reported after `ISOLATION_FAILED` with what failed and the errno, exit 127:
the worker turns it into `PolicyDenied` (never a run without the isolation asked for).

Standard library only (it runs with `-I -S`, where the package is not importable); the
worker imports this module for its path and markers.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import sys
from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:  # imported where the namespaces are made: the worker imports this module
    import ctypes

__all__ = ["EXEC_FAILED", "ISOLATION_FAILED", "main"]

EXEC_FAILED = "\x00wovyr-shell-exec-failed:"
ISOLATION_FAILED = "\x00wovyr-shell-isolation-failed:"

_CLONE_NEWNS = 0x00020000
_CLONE_NEWUSER = 0x10000000
_CLONE_NEWPID = 0x20000000
_MS_RDONLY = 0x1
_MS_NOSUID = 0x2
_MS_NODEV = 0x4
_MS_NOEXEC = 0x8
_MS_REC = 0x4000
_MS_PRIVATE = 0x40000
_PR_SET_NO_NEW_PRIVS = 38
# Python ignores these at start-up (and the launcher SIGTERM); an ignored signal stays
# ignored across exec, so the program would inherit it.
_RESET = ("SIGPIPE", "SIGXFZ", "SIGXFSZ", "SIGTERM")


class _Refused(Exception):
    def __init__(self, what: str, errno: int) -> None:
        super().__init__(what, errno)
        self.what, self.errno = what, errno


def main() -> NoReturn:
    job: dict[str, Any] = json.loads(sys.stdin.buffer.read())
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    isolate = job.get("isolate")
    if isolate is None:
        _exec(job)
    _isolated(job, isolate)


def _exec(job: dict[str, Any]) -> NoReturn:
    """Lower the limits (never above a hard limit already in place), reset, exec."""
    for name, wanted_soft, wanted_hard in job["limits"]:
        which = getattr(resource, name)
        soft, hard, old = wanted_soft, wanted_hard, resource.getrlimit(which)[1]
        if old != resource.RLIM_INFINITY:
            soft, hard = min(soft, old), min(hard, old)
        resource.setrlimit(which, (soft, hard))
    for name in _RESET:
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), signal.SIG_DFL)
    try:
        os.execve(job["program"], job["argv"], job["env"])
    except OSError as exc:
        _report(EXEC_FAILED, [exc.errno, str(exc)])
    os._exit(127)  # pragma: no cover - execve does not return


def _report(marker: str, details: list[Any]) -> None:
    sys.stderr.write(marker + json.dumps(details))
    sys.stderr.flush()


def _isolated(job: dict[str, Any], isolate: dict[str, Any]) -> NoReturn:
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        _enter(libc, isolate)
    except _Refused as refused:
        _report(ISOLATION_FAILED, [refused.what, refused.errno])
        os._exit(127)
    read_end, write_end = os.pipe()
    init = os.fork()
    if init == 0:
        os.close(read_end)
        _init(libc, job, isolate, write_end)
    os.close(write_end)
    reported = b""
    while chunk := os.read(read_end, 64):
        reported += chunk
    _, status = os.waitpid(init, 0)
    _end_like(int(reported) if reported else status)


def _enter(libc: ctypes.CDLL, isolate: dict[str, Any]) -> None:
    """New mount and PID namespaces (and a user namespace unless root switches user)."""
    as_root = isolate.get("uid") is not None
    flags = _CLONE_NEWNS | _CLONE_NEWPID | (0 if as_root else _CLONE_NEWUSER)
    uid, gid = os.geteuid(), os.getegid()
    _call(libc.unshare(flags), "unshare(" + ("" if as_root else "CLONE_NEWUSER|") + "NEWNS|NEWPID)")
    if not as_root:
        try:
            _write("/proc/self/setgroups", "deny")
            _write("/proc/self/uid_map", f"{uid} {uid} 1")
            _write("/proc/self/gid_map", f"{gid} {gid} 1")
        except OSError as exc:
            raise _Refused(f"mapping the user namespace: {exc.filename}", exc.errno or 0) from None


def _write(path: str, text: str) -> None:
    with open(path, "w", encoding="ascii") as file:
        file.write(text)


def _call(result: int, what: str) -> None:
    import ctypes

    if result != 0:
        raise _Refused(what, ctypes.get_errno())


def _mount(libc: ctypes.CDLL, source: str | None, target: str, kind: str | None, flags: int,
           data: str | None = None) -> None:  # fmt: skip
    import ctypes

    _call(
        libc.mount(
            None if source is None else source.encode(),
            target.encode(),
            None if kind is None else kind.encode(),
            ctypes.c_ulong(flags),
            None if data is None else data.encode(),
        ),
        f"mount {kind or 'private'} on {target}",
    )


def _init(libc: ctypes.CDLL, job: dict[str, Any], isolate: dict[str, Any], report: int) -> NoReturn:
    """PID 1 of the namespace: prepare the mounts, start the program, report how it ended."""
    try:
        _mount(libc, None, "/", None, _MS_REC | _MS_PRIVATE)
        quiet = _MS_NOSUID | _MS_NODEV | _MS_NOEXEC
        for path in isolate["hide"]:
            if os.path.isdir(path):
                _mount(libc, "tmpfs", path, "tmpfs", _MS_RDONLY | quiet, "size=4k,mode=0555")
        _mount(libc, "proc", "/proc", "proc", quiet)
    except _Refused as refused:
        _report(ISOLATION_FAILED, [refused.what, refused.errno])
        os._exit(127)
    program = os.fork()
    if program == 0:
        os.close(report)
        _program(libc, job, isolate)
    while True:
        try:
            pid, status = os.waitpid(-1, 0)  # orphans of the namespace are ours to reap
        except ChildProcessError:  # pragma: no cover - the program is always a child
            os._exit(1)
        if pid == program:
            os.write(report, str(status).encode())
            os._exit(0)  # the kernel kills what is left in the namespace


def _program(libc: ctypes.CDLL, job: dict[str, Any], isolate: dict[str, Any]) -> NoReturn:
    try:
        try:
            os.chdir(job["cwd"])
        except OSError as exc:
            raise _Refused(f"entering {job['cwd']}", exc.errno or 0) from None
        if isolate.get("uid") is not None:
            try:
                os.setgroups([])
                os.setgid(isolate["gid"])
                os.setuid(isolate["uid"])
            except OSError as exc:
                raise _Refused(f"switching to uid {isolate['uid']}", exc.errno or 0) from None
        _call(libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")
    except _Refused as refused:
        _report(ISOLATION_FAILED, [refused.what, refused.errno])
        os._exit(127)
    _exec(job)


def _end_like(status: int) -> NoReturn:
    """Exit as the program did: its code, or killed by its signal."""
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # SIGXCPU's default dumps core
        if number not in (signal.SIGKILL, signal.SIGSTOP):
            signal.signal(number, signal.SIG_DFL)
        os.kill(os.getpid(), number)
        os._exit(128 + number)  # a signal whose default is not to terminate
    os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1)


if __name__ == "__main__":
    main()
