"""Isolated `shell` steps: what a worker hides from them, and as whom they run.

A policy with `shell_isolation` (every tenant's grant of `shell`, unless the host's
administrator turned it off for that tenant) runs each attempt through the launcher in new
mount and PID namespaces (`wovyr.activities.launcher`): the step sees a fresh `/proc` with
only its own processes (not the worker's environment, memory or files through
`/proc/PID/...`), the paths of `ShellSandbox.hide` (the worker's `WOVYR_HOME`, with the KMS
key file, and the SQLite database's directory) as empty read-only directories, and holds
no capability. How, depends on the worker:

- **root**: mount and PID namespaces directly, and the program runs as the sandbox account
  (`ShellSandbox.user`, default `nobody`): a uid of its own, which cannot read root's files
  or signal the worker, and which the process limit counts (root is exempt from it);
- **any other user**: the same inside a new user namespace mapping only the worker's own
  uid and gid (unprivileged user namespaces must be allowed: `user.max_user_namespaces` >
  0, and on some distributions `kernel.unprivileged_userns_clone=1` or AppArmor's
  `kernel.apparmor_restrict_unprivileged_userns=0`). The program runs as the worker's uid,
  without capabilities: it still reads what that uid may read outside the hidden paths.

Where the namespaces cannot be made (a non-root worker without user namespaces, a root
worker without `CAP_SYS_ADMIN` in a container, a seccomp filter), an isolated attempt is
`PolicyDenied` naming what failed: never a run without the isolation its policy asks for.
The host's administrator decides whether a tenant may run unisolated
(`wovyr admin tenants set T --no-shell-isolation`).
"""

from __future__ import annotations

import errno
import json
import os
import pwd
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wovyr.activities import launcher
from wovyr.activities.base import NonRetryableError
from wovyr.files import process_folder

__all__ = ["LAUNCHER", "ShellSandbox", "isolation_refusal", "probe"]

#: The launcher program, run as `python -I -S LAUNCHER`.
LAUNCHER = str(Path(launcher.__file__).resolve())
_PROBE_SECONDS = 10.0


@dataclass(frozen=True)
class ShellSandbox:
    """What a worker's isolated shell steps do not see, and the account they run as when
    the worker is root (a name or a number; its primary group too)."""

    hide: tuple[str, ...] = ()
    user: str = "nobody"

    @classmethod
    def of_host(cls, home: Path | str, store_url: str, user: str = "nobody") -> ShellSandbox:
        """Hide `home` (WOVYR_HOME: the development KMS key, the UI's session key, the
        default database) and the directory of a SQLite store elsewhere, or this process's
        folder where `memory://` stores keep their files."""
        hide = [os.path.abspath(os.path.expanduser(home))]
        if store_url.startswith("sqlite:///"):
            database = os.path.abspath(os.path.expanduser(store_url[len("sqlite:///") :]))
            hide.append(os.path.dirname(database))
        elif store_url.startswith("memory:"):
            hide.append(str(process_folder()))
        return cls(tuple(dict.fromkeys(hide)), user)

    def job(self) -> dict[str, Any]:
        """The launcher's `isolate` entry for this worker: as root, the sandbox account's
        uid and gid (`PolicyDenied` when it does not exist); otherwise a user namespace."""
        uid = gid = None
        if os.geteuid() == 0:
            uid, gid = self.account()
        return {"hide": list(self.hide), "uid": uid, "gid": gid}

    def account(self) -> tuple[int, int]:
        """The sandbox account's uid and gid; `PolicyDenied` when it does not exist or is
        root (a step as root could undo what hides the worker's files)."""
        try:
            entry = pwd.getpwuid(int(self.user)) if self.user.isdigit() else pwd.getpwnam(self.user)
            uid, gid = entry.pw_uid, entry.pw_gid
        except (KeyError, ValueError):
            if not self.user.isdigit():
                raise NonRetryableError(
                    f"`shell` isolation needs the sandbox account {self.user!r}, which does "
                    "not exist on this worker (WOVYR_SHELL_USER)",
                    type="PolicyDenied",
                ) from None
            uid = gid = int(self.user)  # a uid without a passwd entry: its own group id
        if uid == 0:
            raise NonRetryableError(
                "`shell` isolation runs steps as an account other than root: "
                f"WOVYR_SHELL_USER={self.user!r} is root",
                type="PolicyDenied",
            )
        return uid, gid


def isolation_refusal(stderr: str) -> NonRetryableError | None:
    """`PolicyDenied` for a launcher that could not isolate the step (its report on
    stderr), naming what failed and what the host lacks; None for any other failure."""
    if not stderr.startswith(launcher.ISOLATION_FAILED):
        return None
    try:  # the launcher's report; a program that writes something like it is just a failure
        what, number = json.loads(stderr[len(launcher.ISOLATION_FAILED) :])
        what, number = str(what), int(number)
        os.strerror(number)
    except (TypeError, ValueError, OverflowError):
        return None
    return NonRetryableError(
        f"`shell` runs isolated for this tenant (shell_isolation: true), and this worker "
        f"cannot isolate it: {what} failed ({_errno_text(number)}). {_hint(what, number)}",
        type="PolicyDenied",
        details={"isolation": what, "errno": errno.errorcode.get(number, str(number))},
    )


def _errno_text(number: int) -> str:
    return f"{errno.errorcode.get(number, number)}: {os.strerror(number)}"


def _hint(what: str, number: int) -> str:
    if what.startswith("unshare(CLONE_NEWUSER"):
        return (
            "A worker that is not root needs unprivileged user namespaces "
            "(user.max_user_namespaces > 0; kernel.unprivileged_userns_clone=1 where it "
            "exists; no AppArmor or seccomp rule against them), or run it as root."
        )
    if what.startswith("unshare("):
        return (
            "A root worker needs CAP_SYS_ADMIN (a container may have dropped it, or a seccomp "
            "filter refuse unshare)."
        )
    if what.startswith("mount"):
        return (
            "The kernel refused a mount in the step's namespaces (in a container: a masked "
            "/proc that may not be mounted again, or CAP_SYS_ADMIN dropped)."
        )
    return (
        "The host's administrator may run this tenant's shell steps unisolated "
        "(wovyr admin tenants set TENANT --no-shell-isolation): they then read what the "
        "worker's user can, the KMS root key included."
    )


def probe(sandbox: ShellSandbox) -> str | None:
    """Whether this host can isolate shell steps: None when it can, else why not (it runs
    `true` through the launcher, isolated)."""
    import shutil
    import subprocess
    import sys

    program = shutil.which("true") or "/bin/true"
    try:
        job = {
            "program": program,
            "argv": ["true"],
            "env": {},
            "cwd": "/",
            "limits": [],
            "isolate": sandbox.job(),
        }
    except NonRetryableError as exc:
        return exc.message
    done = subprocess.run(
        [sys.executable, "-I", "-S", LAUNCHER],
        input=json.dumps(job).encode(),
        capture_output=True,
        env={},
        timeout=_PROBE_SECONDS,
        check=False,
    )
    if done.returncode == 0:
        return None
    text = done.stderr.decode("utf-8", errors="replace")
    refusal = isolation_refusal(text)
    return refusal.message if refusal else f"the launcher exited {done.returncode}: {text[-300:]}"
