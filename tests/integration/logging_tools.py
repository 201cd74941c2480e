"""Handlers for the attempt-log tests: they log through `ctx.log` and this module's logger."""

from __future__ import annotations

import logging
import sys

from wovyr.activities.base import ActivityContext

logger = logging.getLogger(__name__)
other = logging.getLogger("somebody.else")


def charge(amount: int, token: str, ctx: ActivityContext) -> dict[str, int]:
    ctx.log.info("charging %s with token %s", amount, token)
    logger.info("module says hello on attempt %s", ctx.attempt)
    other.warning("not the handler's module: not kept")
    if ctx.attempt == 1:
        logger.error("card declined for %s", token)
        raise RuntimeError(f"declined ({token})")
    return {"charged": amount}


def chatty(n: int, ctx: ActivityContext) -> int:
    for i in range(n):
        ctx.log(f"line {i}")
    return n


def noisy(token: str) -> str:
    """Prints and logs its token as a careless handler does (the worker masks it)."""
    print("token is", token, "ok")  # written in pieces
    print(f"no newline {token}", end="", file=sys.stderr)
    other.warning("another module sees %s", token)
    try:
        raise ValueError(f"bad {token}")
    except ValueError:
        logger.exception("failed with %s", token, stack_info=True)
    return "ok"


def long_line(token: str, ctx: ActivityContext) -> str:
    """A line so long that it is cut, the cut falling inside the token; and a printed one
    without a newline, longer than a line may be."""
    ctx.log.info("%s%s", "x" * 1990, token)
    print("y" * 9000 + token, end="")
    return "ok"
