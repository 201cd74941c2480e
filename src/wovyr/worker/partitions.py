"""Which partitions of the work queue a worker claims from.

Executions fall into `of` partitions by their stable shard (`wovyr.store.shards`). A worker
either takes a fixed set (`wovyr worker --partitions 0-7 --of 16`, parsed by
`parse_partitions`) or joins the membership table and gets its share computed by
`assign_partitions` from the sorted list of live members: member `i` of `n` owns the
contiguous range `[i*of//n, (i+1)*of//n)`. Every worker computes the same answer from the
same list, so once the views agree every partition has exactly one owner. While views
differ (a member just joined or expired) a partition may briefly have two owners or none:
that is safe (claims use `SKIP LOCKED` and fences), the next heartbeat round fixes it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from wovyr.errors import ConfigError
from wovyr.store.capabilities import Membership, capabilities
from wovyr.store.shards import SHARD_COUNT, Peer, coverage_problems, shards_for

__all__ = [
    "DEFAULT_MEMBER_PARTITIONS",
    "Membership",
    "assign_partitions",
    "parse_partitions",
    "partition_setup",
    "peer",
    "report_coverage",
]

log = logging.getLogger("wovyr.worker")

# Partitions handed out by membership when `of` is not given: more than workers are ever
# expected on one database, and a divisor of the 1024 shards so all are the same size.
DEFAULT_MEMBER_PARTITIONS = 64


def parse_partitions(text: str, of: int) -> list[int]:
    """`"0-7"`, `"0,2,4"`, `"0-3,8,10-11"` -> sorted partition numbers, each in `0..of-1`.

    Raises `ConfigError` naming the bad piece: empty items, reversed ranges, non-numbers,
    numbers outside the range, or an `of` outside 1..1024.
    """
    if not 1 <= of <= SHARD_COUNT:
        raise ConfigError(f"--of must be between 1 and {SHARD_COUNT}, got {of}")
    found: set[int] = set()
    for raw in text.split(","):
        item = raw.strip()
        if not item:
            raise ConfigError(
                f"empty item in partitions {text!r}", hint="use a list like 0-7 or 0,2,4"
            )
        low_text, dash, high_text = item.partition("-")
        try:
            low = int(low_text)
            high = int(high_text) if dash else low
        except ValueError:
            raise ConfigError(
                f"partition {item!r} is not a number or a range", hint="use 0-7 or 0,2,4"
            ) from None
        if low > high:
            raise ConfigError(f"partition range {item!r} runs backwards", hint=f"use {high}-{low}")
        if low < 0 or high >= of:
            raise ConfigError(
                f"partition {item!r} is outside 0..{of - 1}",
                hint=f"--of {of} gives partitions 0 to {of - 1}",
            )
        found.update(range(low, high + 1))
    return sorted(found)


def assign_partitions(members: Sequence[str], me: str, of: int) -> list[int]:
    """The partitions `me` owns among the live `members` (any order; `me` must be one)."""
    ordered = sorted(set(members))
    if me not in ordered:
        return []
    index, count = ordered.index(me), len(ordered)
    return list(range(index * of // count, (index + 1) * of // count))


def partition_setup(
    store: object, partitions: Sequence[int] | None, of: int | None, membership: bool
) -> tuple[list[int] | None, int | None]:
    """A worker's starting (partitions, of), validated: fixed ones as given (None: all), or
    with membership none until its first heartbeat assigns a share of `of` (default 64)."""
    if not membership:
        shards_for(partitions, of)  # validates; raises ConfigError
        return (sorted(set(partitions)) if partitions is not None else None), of
    if partitions is not None:
        raise ConfigError("membership assigns the partitions: do not pass partitions too")
    count = DEFAULT_MEMBER_PARTITIONS if of is None else of
    if not 1 <= count <= SHARD_COUNT:
        raise ConfigError(f"the partition count must be between 1 and {SHARD_COUNT}")
    if capabilities(store).membership is None:
        raise ConfigError(
            f"the store {type(store).__name__} keeps no worker membership",
            hint="use PostgreSQL, or give --partitions/--of explicitly",
        )
    return [], count


def peer(owner: str, mode: str, partitions: Sequence[int] | None, of: int | None) -> Peer:
    """How a worker claims, as it reports itself to the others (`mode`: member/fixed/all)."""
    return Peer(
        owner,
        mode,
        of if mode != "all" else None,
        tuple(partitions or ()) if mode == "fixed" else (),
    )


def report_coverage(owner: str, before: list[str], peers: Sequence[Peer]) -> list[str]:
    """The coverage problems of the live `peers`; the new ones are logged as errors, and
    their end (all clear after problems) as information."""
    problems = coverage_problems(peers)
    if problems == before:
        return before
    for problem in problems:
        if problem not in before:
            log.error("worker %s: %s", owner, problem)
    if not problems:
        log.info("worker %s: the live workers claim every partition again", owner)
    return problems
