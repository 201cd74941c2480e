"""Writing files so that a crash never leaves a torn one: `atomic_write`.

Every file the project writes (the KMS development key, the web UI's session secret,
`wovyr schema -o`, ...) goes through `atomic_write`: the data is written to a temporary file
in the same folder, fsynced, renamed over the target (or linked, when the target must not be
replaced), and the folder is fsynced so the rename itself survives a power loss. A process
killed at any point leaves either the old file or the new one, never a mix, and at worst a
stray `.<name>.*.tmp` beside it.

`process_folder()` is the process's private temporary folder: `memory://` stores keep their
files in it, and isolated shell steps are not shown it.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import secrets
import shutil
import tempfile
import threading
from pathlib import Path

__all__ = ["atomic_write", "fsync_folder", "process_folder"]

_process_folder: dict[int, Path] = {}  # pid -> its folder (a forked child makes its own)
_process_folder_lock = threading.Lock()


def atomic_write(
    path: str | os.PathLike[str],
    data: bytes | str,
    mode: int = 0o644,
    *,
    exclusive: bool = False,
) -> bool:
    """Write `data` (text is UTF-8) to `path` atomically, the file created with `mode`.

    With `exclusive`, an existing file is kept (never replaced) and False is returned: two
    processes creating the same key file at once agree on the first one published.
    """
    target = Path(path)
    folder = target.parent
    body = data.encode("utf-8") if isinstance(data, str) else data
    tmp = folder / f".{target.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        try:
            view = memoryview(body)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            os.fchmod(fd, mode)  # the umask may have narrowed it
            os.fsync(fd)
        finally:
            os.close(fd)
        if exclusive:
            try:
                os.link(tmp, target)
            except FileExistsError:
                return False
            finally:
                tmp.unlink()
        else:
            os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    fsync_folder(folder)
    return True


def fsync_folder(folder: Path) -> None:
    """Make the names in `folder` (a rename, a new file) survive a power loss."""
    with contextlib.suppress(OSError):  # some filesystems cannot open a folder for reading
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def process_folder() -> Path:
    """This process's private temporary folder (0700, made on first use, removed at exit)."""
    pid = os.getpid()
    with _process_folder_lock:
        folder = _process_folder.get(pid)
        if folder is None:
            folder = Path(tempfile.mkdtemp(prefix=f"wovyr-{pid}-"))
            _process_folder[pid] = folder
            atexit.register(_remove_process_folder, pid, folder)
        return folder


def _remove_process_folder(pid: int, folder: Path) -> None:
    if os.getpid() == pid:  # not in a forked child that exits through atexit
        shutil.rmtree(folder, ignore_errors=True)
