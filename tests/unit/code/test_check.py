"""The determinism checker reads a workflow function's source and names, by line and
column, what a replay could not repeat; a function that goes through its context only is
clean."""

from __future__ import annotations

import datetime as dt
import os
import random
import time
import uuid

import wovyr
from wovyr.code.check import check_workflow


@wovyr.workflow(name="check-bad")
async def bad(ctx: wovyr.Context, n: int) -> float:
    started = dt.datetime.now()
    if random.random() > 0.5:
        time.sleep(1)
    home = os.environ["HOME"]
    with open(home) as f:
        f.read()
    await ctx.run("x.y", at=started.isoformat(), id=str(uuid.uuid4()))
    return time.time()


@wovyr.workflow(name="check-good")
async def good(ctx: wovyr.Context, n: int) -> dict[str, object]:
    now = ctx.now()
    pick = ctx.random()
    await ctx.sleep("1h")
    result = await ctx.run("x.y", at=now.isoformat(), pick=pick, token=ctx.uuid())
    return {"result": result}


def test_each_unrepeatable_call_is_named_where_it_is() -> None:
    first = bad.fn.__code__.co_firstlineno  # the decorator's line
    found = [(f.line - first, f.message) for f in check_workflow(bad)]
    assert found == [
        (2, "workflow function dt.datetime.now() reads the wall clock: use ctx.now()"),
        (3, "workflow function random.random() is random: use ctx.random()"),
        (4, "workflow function time.sleep() blocks the worker: use await ctx.sleep(...)"),
        (
            5,
            "workflow function os.environ reads the environment, which differs between "
            "workers: pass it as an input",
        ),
        (
            6,
            "workflow function open() reads or writes a file: do it in an activity "
            "(await ctx.run(...))",
        ),
        (8, "workflow function uuid.uuid4() is random: use ctx.uuid()"),
        (9, "workflow function time.time() reads the wall clock: use ctx.now()"),
    ]
    assert all(f.file == __file__ and f.column >= 1 for f in check_workflow(bad))


def test_a_function_that_uses_its_context_only_is_clean() -> None:
    assert check_workflow(good) == []
