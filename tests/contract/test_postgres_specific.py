"""What only the PostgreSQL store does: migrations, SKIP LOCKED claims under contention,
the database clock, LISTEN/NOTIFY, error translation and the `wovyr db` commands."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from wovyr.errors import StoreError, StoreUnavailable
from wovyr.events import Event
from wovyr.store.base import ClaimAsk, CommitOutcome, NewExecution, StepWrite
from wovyr.store.postgres import PostgresStore
from wovyr.store.postgres.queries import migrations, queries
from wovyr.store.shards import stable_shard

pytestmark = pytest.mark.postgres

T0 = datetime(2030, 1, 1, tzinfo=UTC)


@pytest.fixture
def tag() -> str:
    """An application_name that marks this test's connections (other sessions may share
    the server: only ever terminate our own backends)."""
    return f"wovyr-test-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def pg(postgres_url: str, tag: str) -> Iterator[PostgresStore]:
    store = PostgresStore(f"{postgres_url}&application_name={tag}", max_size=4)
    yield store
    store.close()


def admin(url: str) -> psycopg.Connection[Any]:
    return psycopg.connect(url, autocommit=True)


def step(
    execution_id: str,
    seq: int,
    *,
    fence: int | None = None,
    ready: bool = True,
    release: bool = False,
) -> StepWrite:
    return StepWrite(
        execution_id=execution_id,
        expected_seq=seq,
        events=[Event("Thing", T0, {"i": seq})],
        checkpoint={"seq": seq + 1},
        status="running",
        updated_at=T0,
        fence=fence,
        ready=ready,
        release_lease=release,
    )


def start(store: PostgresStore, execution_id: str, *, owner: str | None = None) -> None:
    store.create_execution(
        NewExecution(
            id=execution_id,
            tenant="default",
            workflow="wf",
            version="1",
            definition_hash="h",
            created_at=T0,
            input={},
            first_step=step(execution_id, 0),
            lease_owner=owner,
            lease_until=T0 + timedelta(seconds=30) if owner else None,
        )
    )


def schema_shape(url: str) -> tuple[list[tuple[Any, ...]], ...]:
    """Columns, indexes and table storage options of the current schema, without its name."""
    with admin(url) as conn:
        columns = conn.execute(
            "SELECT table_name, column_name, ordinal_position, data_type, is_nullable,"
            " column_default, is_identity FROM information_schema.columns"
            " WHERE table_schema = current_schema() ORDER BY 1, 3"
        ).fetchall()
        indexes = conn.execute(
            "SELECT tablename, indexname, replace(indexdef, current_schema() || '.', '')"
            " FROM pg_indexes WHERE schemaname = current_schema() ORDER BY 1, 2"
        ).fetchall()
        options = conn.execute(
            "SELECT relname, reloptions FROM pg_class"
            " WHERE relnamespace = current_schema()::regnamespace AND relkind = 'r'"
            " ORDER BY 1"
        ).fetchall()
    return columns, indexes, options


# --- migrations ------------------------------------------------------------------------


def test_migrations_twice_are_a_no_op_and_match_a_fresh_install(postgres_url: str) -> None:
    latest = max(v for v, _ in migrations())
    store = PostgresStore(postgres_url, auto_migrate=False)
    try:
        assert store.schema_version() == 0
        assert store.pending_migrations() == [v for v, _ in migrations()]
        assert store.migrate() == latest
        shape = schema_shape(postgres_url)
        assert store.migrate() == latest  # again: nothing to do
        assert store.pending_migrations() == []
    finally:
        store.close()
    PostgresStore(postgres_url).close()  # and once more, automatically on open
    assert schema_shape(postgres_url) == shape
    with admin(postgres_url) as conn:
        applied = conn.execute("SELECT version FROM wovyr_schema_migrations ORDER BY 1")
        assert [r[0] for r in applied] == [v for v, _ in migrations()]
    # a branch's migration numbered below the highest applied is still reported pending
    middle = sorted(v for v, _ in migrations())[len(migrations()) // 2]
    with admin(postgres_url) as conn:
        conn.execute("DELETE FROM wovyr_schema_migrations WHERE version = %s", (middle,))
    store = PostgresStore(postgres_url, auto_migrate=False)
    try:
        assert store.pending_migrations() == [middle]
    finally:
        store.close()
    with admin(postgres_url) as conn:
        conn.execute("INSERT INTO wovyr_schema_migrations (version) VALUES (%s)", (middle,))
    # A fresh install in another schema gives the same tables, columns and indexes.
    other = f"t_{uuid.uuid4().hex[:12]}"
    base_url = postgres_url.split("?", 1)[0]
    with admin(base_url) as conn:
        conn.execute(f"CREATE SCHEMA {other}")
    try:
        other_url = f"{base_url}?options=-csearch_path%3D{other}"
        PostgresStore(other_url).close()
        assert schema_shape(other_url) == shape
        assert {row[0] for row in shape[0]} >= {"definitions", "executions", "events", "timers"}
        index_names = {row[1] for row in shape[1]}
        assert {"executions_ready", "timers_due", "executions_by_created"} <= index_names
        # Room on each page for HOT updates of a step's row (migration 7).
        assert ("executions", ["fillfactor=50"]) in shape[2]
    finally:
        with admin(base_url) as conn:
            conn.execute(f"DROP SCHEMA {other} CASCADE")


def test_concurrent_start_ups_migrate_once(postgres_url: str) -> None:
    def open_and_close(_: int) -> int:
        store = PostgresStore(postgres_url, max_size=1)
        try:
            return store.schema_version()
        finally:
            store.close()

    with ThreadPoolExecutor(6) as pool:
        versions = set(pool.map(open_and_close, range(6)))
    assert versions == {max(v for v, _ in migrations())}


# --- the claim -------------------------------------------------------------------------


def test_shard_is_stored_at_insert(pg: PostgresStore, postgres_url: str) -> None:
    for i in range(20):
        start(pg, f"s{i}")
    with admin(postgres_url) as conn:
        rows = conn.execute("SELECT id, shard FROM executions").fetchall()
    assert rows and all(shard == stable_shard(i) for i, shard in rows)


def test_claims_under_contention_take_each_execution_exactly_once(
    pg: PostgresStore, postgres_url: str
) -> None:
    ids = [f"c{i:03}" for i in range(200)]
    for i in ids:
        start(pg, i)
    stores = [PostgresStore(postgres_url, max_size=2) for _ in range(4)]
    barrier = threading.Barrier(len(stores))

    def worker(n: int) -> list[str]:
        store, mine = stores[n], []
        barrier.wait()
        while claims := store.claim(ClaimAsk(f"w{n}", T0, 300, 7)):
            mine += [c.execution_id for c in claims]
            done = [step(c.execution_id, c.seq, fence=c.fence, ready=False) for c in claims]
            assert store.commit(done) == [CommitOutcome.OK] * len(claims)
        return mine

    try:
        with ThreadPoolExecutor(len(stores)) as pool:
            results = list(pool.map(worker, range(len(stores))))
    finally:
        for store in stores:
            store.close()
    claimed = [i for result in results for i in result]
    assert len(claimed) == len(set(claimed)) == len(ids)
    assert sum(1 for r in results if r) > 1  # the work was really shared
    assert pg.ready_count(T0) == 0


def test_stale_fence_detected_after_a_concurrent_takeover(pg: PostgresStore) -> None:
    start(pg, "e1")
    [a] = pg.claim(ClaimAsk("A", T0, 30, 10))
    [b] = pg.claim(ClaimAsk("B", T0 + timedelta(seconds=31), 30, 10))
    outcomes = pg.commit([step("e1", 1, fence=a.fence), step("e1", 1, fence=b.fence)])
    assert outcomes == [CommitOutcome.LEASE_LOST, CommitOutcome.OK]


def test_db_clock_measures_leases_with_the_database_clock(postgres_url: str) -> None:
    store = PostgresStore(postgres_url, db_clock=True)
    try:
        start(store, "e1")
        start(store, "e2", owner="X")  # a lease given at start also runs on the DB clock
        before = datetime.now(UTC)
        # `now` is ignored: the lease is 30 s from the database's now, not from 2030.
        [claim] = store.claim(ClaimAsk("A", T0, 30, 10, only=["e1"]))
        record = store.load("e1", "default")
        assert record is not None and record.lease_until is not None
        assert before < record.lease_until < datetime.now(UTC) + timedelta(seconds=31)
        # By the engine clock (2030) the lease has long expired; by the database's it has not.
        assert store.claim(ClaimAsk("B", T0 + timedelta(days=1), 30, 10)) == []
        assert store.ready_count(T0 + timedelta(days=1)) == 0
        leases = store.renew_leases("A", T0, 0.5)
        assert leases[("default", "e1")].fence == claim.fence
        time.sleep(0.6)
        assert [c.execution_id for c in store.claim(ClaimAsk("B", T0, 30, 10, only=["e1"]))] == [
            "e1"
        ]
        other = store.load("e2", "default")
        assert other is not None and other.lease_until is not None
        assert other.lease_until < datetime.now(UTC) + timedelta(seconds=31)
    finally:
        store.close()


# --- LISTEN / NOTIFY -------------------------------------------------------------------


def test_notify_wakes_wait_for_work(pg: PostgresStore, postgres_url: str) -> None:
    assert pg.wait_for_work(0.05) is False  # listening from now on; nothing yet
    other = PostgresStore(postgres_url, max_size=1)
    timer = threading.Timer(0.2, start, args=(other, "e1"))
    try:
        timer.start()
        assert pg.wait_for_work(10) is True  # False had the wait run out
    finally:
        timer.join()
        other.close()
    # Leased and still running: nobody else could claim it, so nobody is woken.
    [claim] = pg.claim(ClaimAsk("A", T0, 30, 10))
    assert pg.commit([step("e1", 1, fence=claim.fence)]) == [CommitOutcome.OK]
    assert pg.wait_for_work(0.2) is False
    # Released while ready: claimable again, so idle workers hear of it.
    assert pg.release_owner("A") == 1
    assert pg.wait_for_work(5) is True
    assert pg.wait_for_work(0.05) is False  # one wake-up drained the queue


def test_wait_for_work_survives_a_lost_listener(
    pg: PostgresStore, postgres_url: str, tag: str
) -> None:
    assert pg.wait_for_work(0.01) is False
    with admin(postgres_url) as conn:
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE application_name = %s AND query ILIKE 'LISTEN%%'",
            (tag,),
        )
    with pytest.raises(StoreUnavailable):
        pg.wait_for_work(2)
    assert pg.wait_for_work(0.01) is True  # reconnected; may have missed work: go look


# --- errors ----------------------------------------------------------------------------


def test_no_driver_error_escapes(pg: PostgresStore) -> None:
    start(pg, "e1")  # an execution whose events are read (an unknown one has none to read)
    with pytest.raises(StoreError) as info:
        pg.history("e1", limit=-1, tenant="default")  # the server refuses a negative LIMIT
    assert not isinstance(info.value, StoreUnavailable)
    pg.close()
    with pytest.raises(StoreError, match="closed"):
        pg.load("e1", "default")
    with pytest.raises(StoreError, match="closed"):
        pg.commit([step("e1", 1)])
    with pytest.raises(StoreError, match="closed"):
        pg.wait_for_work(0.01)


def test_a_refused_batch_writes_nothing(pg: PostgresStore) -> None:
    start(pg, "a")
    start(pg, "b")
    bad = StepWrite(
        execution_id="b",
        expected_seq=1,
        events=[Event("Thing\x00", T0, {})],  # PostgreSQL text has no NUL: refused
        checkpoint={},
        status="running",
        updated_at=T0,
    )
    for batch in ([step("a", 1), bad], [bad]):
        with pytest.raises(StoreError) as info:
            pg.commit(batch)
        assert not isinstance(info.value, StoreUnavailable)
    assert [len(pg.history(i, tenant="default")) for i in ("a", "b")] == [
        1,
        1,
    ]  # nothing of the batch stayed
    assert pg.commit([step("a", 1), step("b", 1)]) == [CommitOutcome.OK] * 2


def test_unreachable_server_is_store_unavailable() -> None:
    with pytest.raises(StoreUnavailable, match="cannot reach"):
        PostgresStore("postgresql://postgres:secret@127.0.0.1:1/test", connect_timeout=1)


def test_terminated_connections_are_replaced(
    pg: PostgresStore, postgres_url: str, tag: str
) -> None:
    start(pg, "e1")
    with admin(postgres_url) as conn:
        killed = conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
            (tag,),
        ).fetchall()
    assert killed
    # pg_terminate_backend only signals: wait (bounded) until those backends are gone.
    deadline = time.monotonic() + 10
    with admin(postgres_url) as conn:
        while conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", (tag,)
        ).fetchone() != (0,):
            assert time.monotonic() < deadline, "the terminated backends did not exit"
            time.sleep(0.01)
    # A write is never retried: the pool's check must have replaced the dead connection.
    assert pg.commit([step("e1", 1)]) == [CommitOutcome.OK]
    assert pg.load("e1", "default") is not None


def test_a_write_that_loses_its_connection_is_unavailable_not_retried(
    pg: PostgresStore, postgres_url: str, tag: str
) -> None:
    start(pg, "e1")
    failure: list[BaseException] = []

    def commit() -> None:
        try:
            pg.commit([step("e1", 1)])
        except BaseException as exc:
            failure.append(exc)

    with admin(postgres_url) as blocker, blocker.transaction():
        blocker.execute("SELECT 1 FROM executions WHERE id = 'e1' FOR UPDATE")
        thread = threading.Thread(target=commit)
        thread.start()
        deadline = time.monotonic() + 10
        killed = 0
        while not killed and time.monotonic() < deadline:
            killed = len(
                blocker.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                    " WHERE wait_event_type = 'Lock' AND application_name = %s",
                    (tag,),
                ).fetchall()
            )
            time.sleep(0.02)
        thread.join(10)
    assert killed and len(failure) == 1
    assert isinstance(failure[0], StoreUnavailable), failure[0]
    record = pg.load("e1", "default")
    assert record is not None and record.seq == 1  # not applied, and not retried
    assert pg.commit([step("e1", 1)]) == [CommitOutcome.OK]


# --- queries use their indexes ---------------------------------------------------------


def test_list_filters_use_their_index(pg: PostgresStore, postgres_url: str) -> None:
    keys = (
        "workflow",
        "parent_id",
        "rerun_of",
        "id_prefix",
        "id_upto",
        "created_after",
        "created_before",
        "cursor_at",
        "cursor_id",
    )
    params: dict[str, Any] = dict.fromkeys(keys)

    def plan(**given: Any) -> str:
        with admin(postgres_url) as conn:
            conn.execute("SET enable_seqscan = off")
            rows = conn.execute(
                "EXPLAIN " + queries()["list_executions"],
                {**params, "tenant": "default", "limit": 51, **given},
                prepare=False,
            ).fetchall()
        return "\n".join(row[0] for row in rows)

    assert "executions_by_status" in (text := plan(status="failed", waiting=None)), text
    # `status=waiting` (stored running, with a waiting_on text) walks its own index
    assert "executions_waiting" in (text := plan(status="running", waiting=True)), text


# --- the CLI ---------------------------------------------------------------------------


def test_wovyr_db_upgrade_and_version(
    postgres_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from wovyr.cli.main import main

    latest = max(v for v, _ in migrations())
    assert main(["db", "version", "--db", postgres_url]) == 0
    out = capsys.readouterr().out
    assert "schema version 0" in out and "pending migrations" in out
    assert main(["db", "upgrade", "--db", postgres_url]) == 0
    assert f"schema version {latest} (upgraded from 0)" in capsys.readouterr().out
    assert main(["db", "upgrade", "--db", postgres_url]) == 0
    assert "up to date" in capsys.readouterr().out
    assert main(["db", "version", "--db", postgres_url, "--json"]) == 0
    assert f'"version": {latest}' in capsys.readouterr().out
