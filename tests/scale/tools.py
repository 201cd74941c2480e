"""Activities of the scale tests, loaded by path (`--activities tests/scale/tools.py`).

Side effects are lines appended, and fsync'd, to a file of their own per process under
`$WOVYR_SCALE_EFFECTS` (a folder): "<execution> <step> <attempt> <pid>". A file per process
means no two writers ever share one; the test reads them all afterwards.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import wovyr
from wovyr.activities.base import ActivityContext


def _append(name: str, line: str) -> None:
    folder = os.environ.get("WOVYR_SCALE_EFFECTS")
    if not folder:
        return
    path = Path(folder) / f"{name}-{os.getpid()}.log"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)


@wovyr.activity("scale.noop")
async def noop(step: str = "") -> None:
    return None


@wovyr.activity("scale.effect")
def effect(step: str, ctx: ActivityContext) -> str:
    """Record the side effect of this attempt (durably), then answer."""
    _append("effects", f"{ctx.execution_id} {step} {ctx.attempt} {os.getpid()}")
    return f"{step}-done"


@wovyr.activity("scale.gate")
def gate(step: str, ctx: ActivityContext) -> int:
    """Say we entered, block until the marker file exists (at most 60 s), then record the
    side effect and answer with our pid."""
    _append("entered", f"{ctx.execution_id} {step} {ctx.attempt} {os.getpid()}")
    marker = Path(os.environ["WOVYR_SCALE_MARKER"])
    deadline = time.monotonic() + 60
    while not marker.exists():
        if time.monotonic() > deadline:
            raise TimeoutError("the marker never appeared")
        time.sleep(0.005)
    _append("effects", f"{ctx.execution_id} {step} {ctx.attempt} {os.getpid()}")
    return os.getpid()
