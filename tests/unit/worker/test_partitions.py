"""Partition specs (`--partitions 0-7 --of 16`) and the membership assignment."""

from __future__ import annotations

from collections.abc import Iterable

import pytest

from wovyr.errors import ConfigError
from wovyr.store.shards import Peer, coverage_problems
from wovyr.worker.partitions import assign_partitions, parse_partitions


def test_parse_ranges_and_lists() -> None:
    assert parse_partitions("0-7", 16) == list(range(8))
    assert parse_partitions("0,2,4", 8) == [0, 2, 4]
    assert parse_partitions(" 3 , 0-1 ,1-2", 8) == [0, 1, 2, 3]  # overlaps merge, sorted
    assert parse_partitions("5", 6) == [5]
    assert parse_partitions("0-1023", 1024) == list(range(1024))


@pytest.mark.parametrize(
    ("spec", "of", "message"),
    [
        ("8", 8, "outside 0..7"),
        ("0-8", 8, "outside 0..7"),
        ("3-1", 8, "runs backwards"),
        ("a", 8, "not a number or a range"),
        ("1-", 8, "not a number or a range"),
        ("-1", 8, "not a number or a range"),
        ("0,,1", 8, "empty item"),
        ("", 8, "empty item"),
        ("0", 0, "between 1 and 1024"),
        ("0", 2048, "between 1 and 1024"),
    ],
)
def test_parse_refuses_bad_specs_clearly(spec: str, of: int, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_partitions(spec, of)


@pytest.mark.parametrize("of", [1, 7, 16, 64, 1024])
@pytest.mark.parametrize("count", [1, 2, 3, 5, 8, 20])
def test_assignment_gives_every_partition_exactly_one_owner(of: int, count: int) -> None:
    members = [f"host-{i}:{1000 + i}" for i in range(count)]
    shares = [assign_partitions(list(reversed(members)), m, of) for m in members]
    owned = [p for share in shares for p in share]
    assert sorted(owned) == list(range(of))
    sizes = [len(s) for s in shares]
    assert max(sizes) - min(sizes) <= 1  # as even as it gets
    assert all(s == sorted(s) and (not s or s == list(range(s[0], s[-1] + 1))) for s in shares)


def test_a_non_member_owns_nothing() -> None:
    assert assign_partitions(["a", "b"], "c", 8) == []
    assert assign_partitions(["b", "a", "a"], "a", 8) == [0, 1, 2, 3]


def fixed(owner: str, of: int, partitions: Iterable[int]) -> Peer:
    return Peer(owner, "fixed", of, tuple(partitions))


def test_coverage_problems() -> None:
    assert coverage_problems([]) == []
    assert coverage_problems([fixed("a", 16, range(16))]) == []
    gaps = coverage_problems([fixed("a", 16, [0, 1, 2, 5]), fixed("b", 16, [7, 8, 9])])
    assert gaps == [
        "partitions 3-4,6,10-15 of 16 have no live worker: executions in them wait until a "
        "worker claims them"
    ]
    # A worker with no filter, or any member of the membership, claims every partition.
    assert coverage_problems([fixed("a", 16, [0]), Peer("b", "all")]) == []
    assert coverage_problems([fixed("a", 16, [0]), Peer("m", "member", 16)]) == []
    # Counts that disagree: said, and the shards left over are counted exactly
    # (0-7 of 16 and 4-7 of 8 leave s % 16 in 8..11: a quarter of the 1024 shards).
    mixed = coverage_problems([fixed("a", 16, range(8)), fixed("b", 8, [4, 5, 6, 7])])
    assert mixed[0].startswith("workers split the queue into different partition counts")
    assert mixed[1].startswith("256 of 1024 shards have no live worker")
    # Members that disagree on the count are flagged too (each covers "everything").
    assert len(coverage_problems([Peer("m", "member", 64), Peer("n", "member", 16)])) == 1
