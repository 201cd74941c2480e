"""Activities for the `wovyr serve` process tests (loaded with --activities FILE).

`step` appends "<execution> <name> <attempt> start|done" to $WOVYR_TEST_EFFECTS (fsync'd)
and, for the step named by $WOVYR_TEST_BLOCK_AT, waits until the file $WOVYR_TEST_MARKER
exists, so a test can kill the server while that step is certainly in flight.
"""

from __future__ import annotations

import asyncio
import os

import wovyr


def _record(line: str) -> None:
    fd = os.open(os.environ["WOVYR_TEST_EFFECTS"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)


@wovyr.activity("step")
async def step(name: str, ctx: wovyr.ActivityContext) -> str:
    _record(f"{ctx.execution_id} {name} {ctx.attempt} start")
    if name == os.environ.get("WOVYR_TEST_BLOCK_AT"):
        while not os.path.exists(os.environ["WOVYR_TEST_MARKER"]):
            await asyncio.sleep(0.02)
    _record(f"{ctx.execution_id} {name} {ctx.attempt} done")
    return f"{name}-result"
