"""Secret variables kept out of the process's environment.

Whoever may read `/proc/PID/environ` of a process (its own user, root) reads the environment
it was *started* with: the kernel shows the block it was given at exec. Deleting a variable
from `os.environ` (unsetenv) changes the C library's array, not that block, so a secret
handed to a long-running `wovyr` process in its environment stays readable there for its
whole life. Hence the `wovyr` command, started with any of `SECRET_VARIABLES` set, moves
their values into a pipe and executes itself again, once (same interpreter, arguments and
pid), with an environment without them and `WOVYR_WITHHELD_FD` naming the pipe; the new
image reads the values into memory and closes the pipe (`withhold`). After that,
`/proc/PID/environ` shows no secret, and neither do the environments of the programs it
starts (they inherit `os.environ`).

What reads settings reads `environ()`: `os.environ` with the withheld values over it. A
child process that needs them (the server's worker process, `wovyr dev`'s server) is handed
them the same way (`handing_over`). `PG*` variables that libpq reads from the C environment
itself are not withheld: keep a database password in the URL (`WOVYR_DATABASE_URL`) or a
`.pgpass` file.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections import ChainMap
from collections.abc import Iterator, Mapping

__all__ = ["FD_VARIABLE", "SECRET_VARIABLES", "environ", "handing_over", "held", "withhold"]

#: What is never left in a `wovyr` process's environment: the KMS root keys, the host's
#: model-provider key, the store URL (it may hold a password), the backup passphrase, and
#: the server's configuration of its worker process (it holds the store URL).
SECRET_VARIABLES = frozenset(
    {
        "WOVYR_KMS_ROOT_KEY",
        "WOVYR_KMS_NEW_ROOT_KEY",
        "WOVYR_LLM_API_KEY",
        "WOVYR_DATABASE_URL",
        "WOVYR_BACKUP_PASSPHRASE",
        "WOVYR_WORKER_PROCESS_CONFIG",
    }
)
FD_VARIABLE = "WOVYR_WITHHELD_FD"
_PIPE_ROOM = 60_000  # below a pipe's buffer: written whole before the reader starts

_held: dict[str, str] = {}


def environ() -> Mapping[str, str]:
    """The process's environment as settings see it: `os.environ`, with the withheld
    values over it."""
    return ChainMap(_held, os.environ)


def held() -> frozenset[str]:
    """The names this process withholds."""
    return frozenset(_held)


def withhold() -> None:
    """Called first by the `wovyr` command: read the values a parent handed over (and close
    their pipe), or move the secret variables out of the environment by executing the
    process again without them. Returns in the process that goes on (the new image)."""
    given = os.environ.pop(FD_VARIABLE, None)
    if given is not None:
        _receive(int(given))
    secret = {k: v for k, v in os.environ.items() if k in SECRET_VARIABLES}
    if not secret:
        return
    env = {k: v for k, v in os.environ.items() if k not in SECRET_VARIABLES}
    values = {**_held, **secret}
    fd = _pipe_of(values)
    if fd is None:  # too large to hand over: keep them, and say that they stay visible
        _warn("secret variables are too large to withhold; they stay in the environment")
        return
    env[FD_VARIABLE] = str(fd)
    try:
        os.execve(sys.executable, [sys.executable, *sys.orig_argv[1:]], env)
    except OSError as exc:  # the interpreter cannot be run again: go on as we are
        os.close(fd)
        _warn(f"cannot withhold the secret variables ({exc}); they stay in the environment")


def _receive(fd: int) -> None:
    chunks = []
    try:
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
    finally:
        os.close(fd)
    values = json.loads(b"".join(chunks) or b"{}")
    _held.update({str(k): str(v) for k, v in values.items()})


def _pipe_of(values: Mapping[str, str]) -> int | None:
    """A pipe's read end holding `values` (inheritable), the write end closed; None when
    they would not fit in its buffer."""
    data = json.dumps(dict(values)).encode()
    if len(data) > _PIPE_ROOM:
        return None
    read_end, write_end = os.pipe()
    try:
        os.write(write_end, data)
    finally:
        os.close(write_end)
    os.set_inheritable(read_end, True)
    return read_end


@contextlib.contextmanager
def handing_over(extra: Mapping[str, str] | None = None) -> Iterator[tuple[dict[str, str], int]]:
    """For starting a child that reads the withheld values (a `wovyr` process, or one that
    calls `withhold` first): its environment (`os.environ` and `FD_VARIABLE`) and the fd to
    pass it (`pass_fds`), which is closed here once the child has started. `extra` are
    more values handed over the same way."""
    fd = _pipe_of({**_held, **(extra or {})})
    if fd is None:
        raise ValueError("the values to hand over do not fit in a pipe's buffer")
    try:
        yield {**os.environ, FD_VARIABLE: str(fd)}, fd
    finally:
        os.close(fd)


def _warn(message: str) -> None:
    sys.stderr.write(f"wovyr: warning: {message}\n")
    sys.stderr.flush()
