"""An opt-in look inside a long-running server or its worker process: allocation sites.

With `WOVYR_DEBUG_TRACEMALLOC=DIR` in its environment, `wovyr serve` (and the worker process
it starts, which inherits the environment) traces allocations with `tracemalloc` (keeping
`WOVYR_DEBUG_TRACEMALLOC_FRAMES` frames of each, default 1: by line) and, on
each SIGUSR2, writes a snapshot to `DIR/<role>-<pid>-<n>.snapshot`. Two snapshots of one
process taken across a stretch of load, compared with `Snapshot.compare_to(..., "lineno")`
(`bench/soak.py --tracemalloc DIR` does it), show what that load left behind and where.
It costs nothing when the variable is unset (nothing is installed); when set, tracing
slows the process severalfold, so it is a debugging aid, never for production.
"""

from __future__ import annotations

import itertools
import logging
import os
import signal
import tracemalloc
from collections.abc import Mapping
from pathlib import Path
from types import FrameType

from wovyr.errors import ConfigError
from wovyr.settings import read

__all__ = ["ENV", "FRAMES_ENV", "install"]

ENV = "WOVYR_DEBUG_TRACEMALLOC"
FRAMES_ENV = "WOVYR_DEBUG_TRACEMALLOC_FRAMES"  # frames kept per allocation (default 1)

log = logging.getLogger("wovyr.server")


def install(role: str, environ: Mapping[str, str] | None = None) -> Path | None:
    """Trace allocations and dump a snapshot on SIGUSR2 if `environ` (default: the
    process's) names a directory for them; the directory, or None (nothing installed)."""
    directory = read(ENV, environ)
    if not directory:
        return None
    frames = read(FRAMES_ENV, environ) or "1"
    if not frames.isdigit() or not 1 <= int(frames) <= 100:
        raise ConfigError(f"{FRAMES_ENV} must be a whole number from 1 to 100, not {frames!r}")
    where = Path(directory)
    where.mkdir(parents=True, exist_ok=True)
    tracemalloc.start(int(frames))
    numbers = itertools.count(1)

    def dump(_signum: int, _frame: FrameType | None) -> None:
        path = where / f"{role}-{os.getpid()}-{next(numbers)}.snapshot"
        tracemalloc.take_snapshot().dump(str(path))
        log.warning("tracemalloc snapshot written to %s", path)

    signal.signal(signal.SIGUSR2, dump)
    log.warning("tracing allocations (%s): SIGUSR2 writes a snapshot to %s", ENV, where)
    return where
