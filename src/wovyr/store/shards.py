"""Stable shards of executions, and the partitions workers claim from.

Every execution gets `shard = crc32(id) mod 1024` when it is created; the value never
changes, so it can be stored and indexed. A worker that takes partitions `P` of `N`
(`wovyr worker --partitions 0-7 --of 16`) claims only executions whose `shard % N` is in
`P`. Any `N` from 1 to 1024 works and partitions `0..N-1` always cover every shard exactly
once; they are the same size only when `N` divides 1024 (a power of two), so prefer those.

CRC-32 is used because it is stable across processes, machines and Python versions
(`hash()` is salted per process) and cheap.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence

from wovyr.errors import ConfigError
from wovyr.store.frozen import record

__all__ = ["SHARD_COUNT", "Peer", "coverage_problems", "shards_for", "stable_shard"]

SHARD_COUNT = 1024


def stable_shard(execution_id: str) -> int:
    """The shard of an execution: `crc32(utf-8 id) mod 1024`, the same everywhere, forever."""
    return zlib.crc32(execution_id.encode("utf-8")) % SHARD_COUNT


def shards_for(partitions: Sequence[int] | None, of: int | None) -> frozenset[int] | None:
    """The stored shard values that partitions `partitions` of `of` cover (None: every one).

    `of` defaults to 1024 (partitions are then raw shards). Raises `ConfigError` when `of`
    is outside 1..1024 or a partition outside `0..of-1`.
    """
    if partitions is None:
        if of is not None:
            raise ConfigError("'of' needs 'partitions' (which partitions of the N to claim)")
        return None
    count = SHARD_COUNT if of is None else of
    if not 1 <= count <= SHARD_COUNT:
        raise ConfigError(f"the partition count must be between 1 and {SHARD_COUNT}, got {of}")
    wanted = set(partitions)
    bad = sorted(p for p in wanted if not 0 <= p < count)
    if bad:
        raise ConfigError(f"partitions must lie in 0..{count - 1}, got {bad}")
    shards = frozenset(s for s in range(SHARD_COUNT) if s % count in wanted)
    return None if len(shards) == SHARD_COUNT else shards


@record
class Peer:
    """A live worker as the others see it: how it chooses what to claim."""

    owner: str
    mode: str  # "member": partitions assigned by membership; "fixed": given; "all": no filter
    of: int | None = None  # its partition count (None for "all")
    partitions: tuple[int, ...] = ()  # the fixed ones ("fixed" only)


def coverage_problems(peers: Sequence[Peer]) -> list[str]:
    """What the live workers get wrong about the queue's partitions, in words (empty: all is
    well): partition counts that disagree (`--of 16` beside `--of 8`), and shards that no
    live worker claims (fixed partitions with gaps, and nobody claiming everything or taking
    part in membership, which covers every partition). Work in such shards waits forever."""
    problems: list[str] = []
    partitioned = sorted((p for p in peers if p.mode != "all"), key=lambda p: p.owner)
    counts = sorted({p.of or SHARD_COUNT for p in partitioned})
    if len(counts) > 1:
        who = ", ".join(f"{p.owner} --of {p.of or SHARD_COUNT}" for p in partitioned)
        problems.append(
            f"workers split the queue into different partition counts ({who}); "
            "give every worker the same --of"
        )
    if not peers or any(p.mode in ("all", "member") for p in peers):
        return problems
    covered: set[int] = set()
    for peer in partitioned:
        covered |= shards_for(peer.partitions, peer.of) or set(range(SHARD_COUNT))
    if len(covered) == SHARD_COUNT:
        return problems
    if len(counts) == 1:
        of = counts[0]
        missing = sorted({s % of for s in range(SHARD_COUNT)} - {s % of for s in covered})
        problems.append(
            f"partitions {_ranges(missing)} of {of} have no live worker: executions in them "
            "wait until a worker claims them"
        )
    else:
        problems.append(
            f"{SHARD_COUNT - len(covered)} of {SHARD_COUNT} shards have no live worker: "
            "executions in them wait until a worker claims them"
        )
    return problems


def _ranges(numbers: Sequence[int]) -> str:
    """[0, 1, 2, 5, 7, 8] -> "0-2,5,7-8" (the --partitions syntax)."""
    parts: list[str] = []
    start = prev = numbers[0]
    for n in [*numbers[1:], None]:
        if n is not None and n == prev + 1:
            prev = n
            continue
        parts.append(str(start) if start == prev else f"{start}-{prev}")
        if n is not None:
            start = prev = n
    return ",".join(parts)
