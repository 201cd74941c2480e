"""Contract, continued: claims by partition and values that round-trip, on every store."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from wovyr.errors import ConfigError
from wovyr.events import Event
from wovyr.store.base import ClaimAsk, NewExecution, StepWrite, Store
from wovyr.store.shards import SHARD_COUNT, shards_for, stable_shard

T0 = datetime(2030, 1, 1, tzinfo=UTC)


def start(
    store: Store, execution_id: str, *, data: object = None, owner: str | None = None
) -> None:
    first = StepWrite(
        execution_id=execution_id,
        expected_seq=0,
        events=[Event("ExecutionStarted", T0, {"input": data})],
        checkpoint={"data": data},
        status="running",
        updated_at=T0,
        ready=True,
        output=data,
    )
    created, _ = store.create_execution(
        NewExecution(
            id=execution_id,
            tenant="default",
            workflow="wf",
            version="1",
            definition_hash="h",
            created_at=T0,
            input=data,
            first_step=first,
            lease_owner=owner,
            lease_until=T0 + timedelta(seconds=30) if owner else None,
        )
    )
    assert created


def test_stable_shard_is_crc32_mod_1024_forever() -> None:
    # Stored values depend on these: changing the function would strand executions.
    assert [stable_shard(i) for i in ("e1", "exec-0", "01JABC")] == [295, 79, 315]
    assert all(0 <= stable_shard(f"x{i}") < SHARD_COUNT for i in range(1000))


def test_shards_for_validates_and_covers_everything_once() -> None:
    assert shards_for(None, None) is None
    assert shards_for([0], 1) is None  # one partition of one: everything
    halves = [shards_for([p], 2) for p in (0, 1)]
    assert all(h is not None and len(h) == 512 for h in halves)
    thirds = [shards_for([p], 3) or frozenset() for p in range(3)]
    assert sum(len(t) for t in thirds) == SHARD_COUNT
    assert set().union(*thirds) == set(range(SHARD_COUNT))
    assert shards_for([], 4) == frozenset()
    for partitions, of in (([4], 4), ([-1], 4), ([0], 0), ([0], 2048)):
        with pytest.raises(ConfigError):
            shards_for(partitions, of)
    with pytest.raises(ConfigError):
        shards_for(None, 4)


def test_claim_by_partition(store: Store) -> None:
    ids = [f"p{i}" for i in range(40)]
    for execution_id in ids:
        start(store, execution_id)
    claimed: dict[int, set[str]] = {}
    for partition in range(4):
        got = store.claim(ClaimAsk("A", T0, 30, 100, partitions=[partition], of=4))
        claimed[partition] = {c.execution_id for c in got}
        assert all(stable_shard(i) % 4 == partition for i in claimed[partition])
    assert sorted(set().union(*claimed.values())) == sorted(ids)
    assert sum(len(c) for c in claimed.values()) == len(ids)
    assert store.claim(ClaimAsk("B", T0 + timedelta(minutes=1), 30, 100, partitions=[])) == []


def test_claim_by_partition_combines_with_only(store: Store) -> None:
    for execution_id in ("a", "b", "c", "d"):
        start(store, execution_id)
    wanted = stable_shard("c") % 2
    got = store.claim(ClaimAsk("A", T0, 30, 10, ["c", "d"], partitions=[wanted], of=2))
    expected = sorted(i for i in ("c", "d") if stable_shard(i) % 2 == wanted)
    assert sorted(c.execution_id for c in got) == expected


def test_values_round_trip_with_their_key_order(store: Store) -> None:
    data = {"zeta": 1, "alpha": {"b": [1, 2.5, None], "a": "é"}, "mid": True, "": "empty key"}
    start(store, "e1", data=data)
    record = store.load("e1", "default")
    assert record is not None
    for value in (record.input, record.output, record.checkpoint["data"]):  # type: ignore[index]
        assert value == data
        assert list(value) == list(data) and list(value["alpha"]) == ["b", "a"]
    [event] = store.history("e1", tenant="default")
    assert list(event.data["input"]) == list(data)


def test_sqlite_migration_backfills_the_shard(tmp_path: Path) -> None:
    from wovyr.store.sqlite import SQLiteStore

    path = tmp_path / "old.db"
    SQLiteStore(path).close()
    with sqlite3.connect(path) as conn:  # back to schema 1 with a row written then
        conn.execute("ALTER TABLE executions DROP COLUMN shard")
        conn.execute("DELETE FROM schema_migrations WHERE version = 2")
        conn.execute(
            "INSERT INTO executions (id, tenant, workflow, version, definition_hash, status,"
            " created_at, updated_at, seq, ready, checkpoint)"
            " VALUES ('old-1', 'default', 'wf', '1', 'h', 'running', 0, 0, 0, 1, '{}')"
        )
    conn.close()
    store = SQLiteStore(path)
    try:
        assert store.schema_version() >= 2
        rows = store._read("SELECT shard FROM executions WHERE id = 'old-1'")
        assert rows[0][0] == stable_shard("old-1")
        [claim] = store.claim(
            ClaimAsk("A", T0, 30, 10, partitions=[stable_shard("old-1") % 8], of=8)
        )
        assert claim.execution_id == "old-1"
    finally:
        store.close()
