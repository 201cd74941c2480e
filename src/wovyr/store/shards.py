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

__all__ = ["SHARD_COUNT", "shards_for", "stable_shard"]

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
