"""Membership on PostgreSQL: workers join, expire and leave; after a heartbeat round every
partition is owned by exactly one live worker, and claims follow the assignment.
In-process, on a ManualClock (the store measures with the engine clock: db_clock=False)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

import psycopg
import pytest

from wovyr.activities.base import ActivityRegistry
from wovyr.clock import ManualClock
from wovyr.engine.engine import Engine
from wovyr.errors import ConfigError, StoreError
from wovyr.store.postgres import PostgresStore
from wovyr.store.shards import stable_shard
from wovyr.store.sqlite import SQLiteStore
from wovyr.worker import Worker

pytestmark = pytest.mark.postgres

OF = 16
BLOCKING = """
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: held}
activities:
  - {id: s, tool: hold}
"""


def assert_exactly_one_owner(workers: Iterable[Worker]) -> None:
    owned = [p for w in workers for p in (w.partitions or [])]
    assert sorted(owned) == list(range(OF)), owned  # all covered, none twice


async def beat(workers: dict[str, Worker], names: str) -> None:
    for name in names:
        await workers[name].heartbeat()


def test_partitions_rebalance_as_workers_join_and_expire(
    migrated_postgres_url: str, clock: ManualClock
) -> None:
    store = PostgresStore(migrated_postgres_url, max_size=4)
    engine = Engine(store, clock=clock)

    async def main() -> None:
        workers = {n: Worker(engine, owner=n, membership=True, of=OF) for n in "abc"}
        try:
            await beat(workers, "a")
            assert workers["a"].partitions == list(range(OF))  # alone: everything
            await beat(workers, "bc")  # b and c join...
            await beat(workers, "abc")  # ...and after one round every view agrees
            for w in workers.values():
                assert w.members == ["a", "b", "c"]
                assert w.partitions  # everyone has a share
            assert_exactly_one_owner(workers.values())
            assert workers["a"].partitions == list(range(5))

            for _ in range(3):  # c stops beating (a crash); a and b go on past its TTL
                clock.advance(11)
                await beat(workers, "ab")
            await beat(workers, "ab")
            assert [m.owner for m in store.members(clock.now(), 30)] == ["a", "b"]
            assert workers["a"].members == workers["b"].members == ["a", "b"]
            assert_exactly_one_owner([workers["a"], workers["b"]])
            assert workers["a"].partitions == list(range(8))

            await workers["b"].close()  # a graceful leave: gone at once, no TTL to wait
            await beat(workers, "a")
            assert workers["a"].members == ["a"] and workers["a"].partitions == list(range(OF))
        finally:
            for w in workers.values():
                await w.close()
        assert store.members(clock.now(), 30) == []

    try:
        asyncio.run(main())
    finally:
        store.close()


def test_claims_follow_the_assignment(
    migrated_postgres_url: str, clock: ManualClock, registry: ActivityRegistry
) -> None:
    release = asyncio.Event()

    async def hold() -> str:
        await release.wait()
        return "ok"

    registry.register("hold", hold)
    store = PostgresStore(migrated_postgres_url, max_size=4)
    engine = Engine(store, clock=clock, activities=registry)
    ids = [engine.start(BLOCKING, execution_id=f"m{i:02}").id for i in range(40)]

    async def main() -> None:
        nonlocal release
        release = asyncio.Event()
        workers = [Worker(engine, owner=n, membership=True, of=OF) for n in "xyz"]
        try:
            for w in workers:
                await w.rebalance()
            for w in workers:
                await w.rebalance()
            assert_exactly_one_owner(workers)
            for w in workers:
                await w.tick()  # claims its partitions only; the steps hold their leases
            for i in ids:
                record = store.load(i, "default")
                assert record is not None and record.lease_owner is not None, i
                owner = next(w for w in workers if w.owner == record.lease_owner)
                assert stable_shard(i) % OF in (owner.partitions or [])
        finally:
            release.set()
            for w in workers:
                await w.close()

    try:
        asyncio.run(main())
    finally:
        store.close()


def test_workers_report_partitions_nobody_claims_and_counts_that_disagree(
    migrated_postgres_url: str, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    store = PostgresStore(migrated_postgres_url, max_size=4)
    engine = Engine(store, clock=clock)

    async def main() -> None:
        low = Worker(engine, owner="low", partitions=range(8), of=OF)
        high = Worker(engine, owner="high", partitions=range(8, 16), of=OF)
        eights = Worker(engine, owner="eights", partitions=[4, 5, 6, 7], of=8)
        members = [Worker(engine, owner=n, membership=True, of=OF) for n in "mn"]
        anything = Worker(engine, owner="anything")
        try:
            await low.heartbeat()
            assert low.coverage_problems == [
                "partitions 8-15 of 16 have no live worker: executions in them wait until "
                "a worker claims them"
            ]
            assert "partitions 8-15 of 16 have no live worker" in caplog.text
            await high.heartbeat()
            await low.heartbeat()
            assert low.coverage_problems == high.coverage_problems == []

            await eights.heartbeat()  # another split of the same queue
            assert len(eights.coverage_problems) == 1
            assert (
                "different partition counts (eights --of 8, high --of 16, low --of 16)"
                in (eights.coverage_problems[0])
            )

            # Fixed and unfiltered workers are not members: the membership still divides
            # all 16 partitions between its own two.
            await anything.heartbeat()
            for w in members + members:
                await w.heartbeat()
            assert members[0].members == ["m", "n"]
            assert members[0].partitions == list(range(8))
            assert members[1].partitions == list(range(8, 16))
            kinds = {m.owner: m.mode for m in store.members(clock.now(), 30)}
            assert kinds == {
                "low": "fixed",
                "high": "fixed",
                "eights": "fixed",
                "m": "member",
                "n": "member",
                "anything": "all",
            }

            await eights.close()
            await high.close()  # partitions 8-15 lose their worker...
            await low.heartbeat()
            assert low.coverage_problems == []  # ...but the members and `anything` claim them
            await anything.close()
            for w in members:
                await w.close()
            await low.heartbeat()
            assert low.coverage_problems and "8-15 of 16" in low.coverage_problems[0]
        finally:
            for w in [low, high, eights, anything, *members]:
                await w.close()

    try:
        asyncio.run(main())
    finally:
        store.close()


def test_a_worker_that_cannot_report_still_claims(
    migrated_postgres_url: str, clock: ManualClock, registry: ActivityRegistry
) -> None:
    """The report is for the coverage check only: when it fails (here its table is gone), a
    worker with fixed partitions (or none) still claims and runs its work."""

    async def quick() -> str:
        return "ok"

    registry.register("hold", quick)
    store = PostgresStore(migrated_postgres_url, max_size=4)
    engine = Engine(store, clock=clock, activities=registry)
    with psycopg.connect(migrated_postgres_url, autocommit=True) as conn:
        conn.execute("DROP TABLE worker_members")
    ids = [engine.start(BLOCKING, execution_id=f"r{i}").id for i in range(4)]

    async def main() -> None:
        for worker in (Worker(engine, owner="all"), Worker(engine, partitions=range(OF), of=OF)):
            try:
                await worker.run_until_idle()
                await worker.heartbeat()
            finally:
                await worker.close()
        member = Worker(engine, owner="m", membership=True, of=OF)
        try:
            with pytest.raises(StoreError):
                await member.rebalance()  # a member cannot know its share without it
        finally:
            await member.close()

    try:
        asyncio.run(main())
        assert {engine.query(i).status for i in ids} == {"completed"}
    finally:
        store.close()


def test_membership_needs_a_store_that_keeps_members() -> None:
    engine = Engine(SQLiteStore())
    with pytest.raises(ConfigError, match="membership"):
        Worker(engine, membership=True)
    with pytest.raises(ConfigError, match="do not pass partitions"):
        Worker(engine, membership=True, partitions=[0], of=2)
    with pytest.raises(ConfigError):
        Worker(engine, partitions=[4], of=4)  # outside 0..3
