"""Activities of the flow-control process tests, loaded by path (`wovyr worker -a FILE`).

`flow.hold` records, inside the activity, when an attempt enters and exits: lines
"enter|exit <execution> <attempt> <pid> <unix time>" appended (O_APPEND: each line is one
write, never interleaved with another process's) to `$WOVYR_FLOW_LOG`, shared by every
worker process; between them it holds for a while.
"""

from __future__ import annotations

import os
import time

import wovyr
from wovyr.activities.base import ActivityContext


def record(what: str, ctx: ActivityContext) -> None:
    line = f"{what} {ctx.execution_id} {ctx.attempt} {os.getpid()} {time.time():.6f}\n"
    fd = os.open(os.environ["WOVYR_FLOW_LOG"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def entered_before(execution_id: str) -> bool:
    with open(os.environ["WOVYR_FLOW_LOG"], encoding="utf-8") as log:
        return sum(1 for line in log if line.startswith(f"enter {execution_id} ")) > 1


@wovyr.activity("flow.hold")
def hold(ctx: ActivityContext, seconds: float = 0.1, first: float = 0.0) -> str:
    """Hold `seconds` (`first` instead, when given, the first time the execution runs it:
    a run after a crash holds `seconds`)."""
    record("enter", ctx)
    time.sleep(first if first and not entered_before(ctx.execution_id) else seconds)
    record("exit", ctx)
    return "held"
