"""The events of the PostgreSQL store are partitioned by their execution's creation month
(migration 0038): each execution's events land in its month's partition (or DEFAULT, which
never refuses a commit), housekeeping creates the months ahead and moves DEFAULT's rows of
a new month into it, and retention drops a past month's partition once no execution of
that month (any tenant) is left, deleting rows only where the partition must stay. Checked
in the catalog (pg_inherits, tableoid)."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest

from wovyr.activities.base import ActivityRegistry
from wovyr.clock import ManualClock
from wovyr.engine.engine import Engine
from wovyr.engine.retention import Retention, purge_expired
from wovyr.events import Event
from wovyr.server.background import Background
from wovyr.settings import Settings
from wovyr.store.base import NewExecution, StepWrite
from wovyr.store.postgres import PostgresStore, partitions
from wovyr.store.postgres.partitions import bucket_of, partition_name
from wovyr.store.postgres.queries import migrations
from wovyr.store.rows import POSTGRES
from wovyr.store.shards import stable_shard
from wovyr.store.sql import role_queries

pytestmark = pytest.mark.postgres

JAN = datetime(2025, 1, 10, 12, 0, tzinfo=UTC)
FEB = datetime(2025, 2, 10, 12, 0, tzinfo=UTC)
MAR = datetime(2025, 3, 10, 12, 0, tzinfo=UTC)


@pytest.fixture
def pg(postgres_url: str) -> Iterator[PostgresStore]:
    store = PostgresStore(postgres_url, max_size=4)
    yield store
    store.close()


def sql(url: str, query: str, *params: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute(query, params).fetchall()


def month_partitions(url: str) -> list[str]:
    """The partitions of events in this schema, by name (DEFAULT included)."""
    rows = sql(
        url,
        "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid"
        " WHERE i.inhparent = 'events'::regclass ORDER BY 1",
    )
    return [str(r[0]) for r in rows]


def homes(url: str, tenant: str, execution_id: str) -> set[str]:
    """The partitions holding an execution's events."""
    rows = sql(
        url,
        "SELECT DISTINCT tableoid::regclass::text FROM events"
        " WHERE tenant = %s AND execution_id = %s",
        tenant,
        execution_id,
    )
    return {str(r[0]) for r in rows}


def step(execution_id: str, seq: int, at: datetime, status: str, tenant: str) -> StepWrite:
    return StepWrite(
        execution_id=execution_id,
        expected_seq=seq,
        events=[Event("Thing", at, {"seq": seq + 1}), Event("Other", at, {})],
        checkpoint={"seq": seq + 2},
        status=status,
        updated_at=at,
        ready=status == "running",
        tenant=tenant,
    )


def make(
    store: PostgresStore,
    execution_id: str,
    created: datetime,
    *,
    finished: bool = True,
    tenant: str = "default",
) -> None:
    """An execution created at `created` (two events), then (`finished`) completed a day
    later (two more)."""
    new = NewExecution(
        id=execution_id,
        tenant=tenant,
        workflow="wf",
        version="1",
        definition_hash="h",
        created_at=created,
        input={},
        first_step=step(execution_id, 0, created, "running", tenant),
    )
    assert store.create_execution(new)[0]
    if finished:
        end = step(execution_id, 2, created + timedelta(days=1), "completed", tenant)
        assert store.commit([end])[0].name == "OK"


def test_bucket_is_the_same_in_python_and_sql(pg: PostgresStore, postgres_url: str) -> None:
    times = [
        datetime(2025, 1, 31, 23, 30, tzinfo=UTC),
        datetime(2025, 2, 1, 0, 0, tzinfo=UTC),
        datetime(1999, 12, 31, 23, 59, 59, tzinfo=UTC),
        datetime.fromisoformat("2025-01-31T22:30:00-02:00"),  # February in UTC
    ]
    for at in times:
        query = "SELECT events_bucket(%s), events_partition_name(events_bucket(%s))"
        bucket, name = sql(postgres_url, query, at, at)[0]
        assert (bucket, name) == (bucket_of(at), partition_name(bucket_of(at)))
    assert partition_name(bucket_of(times[3])) == "events_2025_02"


def test_events_land_in_their_execution_month_and_default_takes_the_rest(
    pg: PostgresStore, postgres_url: str
) -> None:
    changes = pg.keep_event_partitions(JAN)
    assert changes.created == ("events_2025_01", "events_2025_02", "events_2025_03")
    assert pg.keep_event_partitions(JAN).created == ()  # already there
    make(pg, "jan", JAN)
    make(pg, "run", JAN, finished=False)
    # a step two months later still goes to the execution's month, not the event's
    assert pg.commit([step("run", 2, MAR, "running", "default")])[0].name == "OK"
    assert homes(postgres_url, "default", "jan") == {"events_2025_01"}
    assert homes(postgres_url, "default", "run") == {"events_2025_01"}

    # a month without a partition: DEFAULT, and the commit does not fail
    later = datetime(2031, 5, 3, tzinfo=UTC)
    make(pg, "later", later)
    assert homes(postgres_url, "default", "later") == {"events_default"}
    before = [(e.seq, e.type) for e in pg.history("later", tenant="default")]
    assert len(before) == 4
    # housekeeping in that month creates its partition and moves the rows out of DEFAULT
    assert "events_2031_05" in pg.keep_event_partitions(later).created
    assert homes(postgres_url, "default", "later") == {"events_2031_05"}
    assert sql(postgres_url, "SELECT count(*) FROM events_default") == [(0,)]
    assert [(e.seq, e.type) for e in pg.history("later", tenant="default")] == before
    assert [e.seq for e in pg.history("later", 2, 1, tenant="default")] == [3]


def test_history_reads_only_the_execution_partition(pg: PostgresStore, postgres_url: str) -> None:
    pg.keep_event_partitions(JAN)
    make(pg, "jan", JAN)
    make(pg, "feb", FEB)
    params = {"tenant": "default", "id": "feb", "after_seq": 1, "limit": 2}
    with psycopg.connect(postgres_url) as conn:  # one transaction: its locks stay listed
        rows = conn.execute(role_queries("executions", POSTGRES)["history"], params).fetchall()
        locked = conn.execute(
            "SELECT c.relname FROM pg_locks l JOIN pg_class c ON c.oid = l.relation"
            " WHERE l.pid = pg_backend_pid() AND c.relispartition AND c.relkind = 'r'"
        ).fetchall()
    assert [r[0] for r in rows] == [2, 3]
    # pruned when planned: no other month's partition was even opened
    assert locked == [("events_2025_02",)]


def test_retention_drops_a_month_nobody_is_left_in_and_deletes_rows_elsewhere(
    pg: PostgresStore, postgres_url: str
) -> None:
    pg.keep_event_partitions(JAN)
    make(pg, "jan-1", JAN)
    make(pg, "jan-2", JAN + timedelta(days=5))
    make(pg, "feb-1", FEB)
    make(pg, "feb-live", FEB, finished=False)  # a running execution pins February
    make(pg, "mar-1", MAR)
    make(pg, "mar-acme", MAR, finished=False, tenant="acme")  # another tenant pins March
    assert homes(postgres_url, "default", "feb-live") == {"events_2025_02"}

    engine = Engine(
        pg, clock=ManualClock(datetime(2025, 6, 1, tzinfo=UTC)), activities=ActivityRegistry()
    )
    report = purge_expired(engine, Retention(days=30))

    assert report.purged == 4
    names = month_partitions(postgres_url)
    assert "events_2025_01" not in names  # dropped with its last executions
    assert {"events_2025_02", "events_2025_03", "events_default"} <= set(names)
    for gone in ("jan-1", "jan-2", "feb-1", "mar-1"):
        assert pg.load(gone, "default") is None
        assert homes(postgres_url, "default", gone) == set()
    assert len(pg.history("feb-live", tenant="default")) == 2
    assert len(pg.history("mar-acme", tenant="acme")) == 2
    assert sql(postgres_url, "SELECT count(*) FROM events_2025_02") == [(2,)]
    assert sql(postgres_url, "SELECT count(*) FROM events_2025_03") == [(2,)]


def test_housekeeping_drops_past_months_that_are_empty_and_keeps_the_rest(
    pg: PostgresStore, postgres_url: str
) -> None:
    pg.keep_event_partitions(JAN)
    make(pg, "feb-live", FEB, finished=False)
    # January and March have no executions; February has one; June is the current month
    june = datetime(2025, 6, 15, tzinfo=UTC)
    changes = pg.keep_event_partitions(june)
    assert changes.created == ("events_2025_06", "events_2025_07", "events_2025_08")
    assert changes.dropped == ("events_2025_01", "events_2025_03")
    names = month_partitions(postgres_url)
    assert "events_2025_02" in names and "events_2025_01" not in names
    assert len(pg.history("feb-live", tenant="default")) == 2
    # the current month is never dropped, empty or not
    assert pg.keep_event_partitions(june).dropped == ()
    assert "events_2025_06" in month_partitions(postgres_url)


def test_a_drop_that_cannot_get_its_lock_deletes_rows_instead(
    pg: PostgresStore, postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(partitions, "DROP_LOCK_TIMEOUT", "50ms")
    pg.keep_event_partitions(JAN)
    make(pg, "jan-1", JAN)
    make(pg, "feb-live", FEB, finished=False)
    with psycopg.connect(postgres_url) as reader:  # an open transaction that read events
        reader.execute("SELECT count(*) FROM events")
        assert pg.purge_executions("default", ["jan-1"]) == ["jan-1"]
        assert "events_2025_01" in month_partitions(postgres_url)  # kept: no lock in time
        assert homes(postgres_url, "default", "jan-1") == set()  # its rows deleted
        reader.rollback()
    # the next housekeeping round drops the month it emptied
    assert pg.keep_event_partitions(datetime(2025, 6, 1, tzinfo=UTC)).dropped == (
        "events_2025_01",
        "events_2025_03",
    )


def test_migration_converts_a_populated_events_table(postgres_url: str) -> None:
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(
            "CREATE TABLE wovyr_schema_migrations (version integer PRIMARY KEY,"
            " applied_at timestamptz NOT NULL DEFAULT now())"
        )
        for version, script in migrations():
            if version >= 37:
                break
            conn.execute(script.encode("utf-8"), prepare=False)
            conn.execute("INSERT INTO wovyr_schema_migrations (version) VALUES (%s)", (version,))
        for tenant, eid, created in (("default", "a", JAN), ("acme", "a", FEB), ("acme", "b", JAN)):
            conn.execute(
                "INSERT INTO executions (id, tenant, workflow, version, definition_hash, status,"
                " created_at, updated_at, seq, ready, shard, checkpoint)"
                " VALUES (%s, %s, 'wf', '1', 'h', 'running', %s, %s, 3, true, %s,"
                " '{\"seq\": 3}')",
                (eid, tenant, created, created, stable_shard(eid)),
            )
            for seq in (1, 2, 3):  # the last event a month later: still its execution's month
                conn.execute(
                    "INSERT INTO events (tenant, execution_id, seq, type, at, data)"
                    " VALUES (%s, %s, %s, 'Thing', %s, %s)",
                    (
                        tenant,
                        eid,
                        seq,
                        created + timedelta(days=31 * (seq // 3)),
                        f'{{"n": {seq}}}',
                    ),
                )
        conn.execute(  # an event whose execution is gone keeps its own month
            "INSERT INTO events (tenant, execution_id, seq, type, at, data)"
            " VALUES ('default', 'orphan', 1, 'Thing', %s, '{}')",
            (MAR,),
        )
    store = PostgresStore(postgres_url)
    try:
        assert store.schema_version() >= 38
        assert homes(postgres_url, "default", "a") == {"events_2025_01"}
        assert homes(postgres_url, "acme", "a") == {"events_2025_02"}
        assert homes(postgres_url, "acme", "b") == {"events_2025_01"}
        assert homes(postgres_url, "default", "orphan") == {"events_default"}
        history = store.history("a", tenant="acme")
        assert [(e.seq, e.data) for e in history] == [(1, {"n": 1}), (2, {"n": 2}), (3, {"n": 3})]
        assert sql(postgres_url, "SELECT count(*) FROM events") == [(10,)]
        assert sql(postgres_url, "SELECT to_regclass('events_unpartitioned')") == [(None,)]
        key = sql(
            postgres_url,
            "SELECT pg_get_constraintdef(oid) FROM pg_constraint"
            " WHERE conrelid = 'events'::regclass AND contype = 'p'",
        )
        assert key == [("PRIMARY KEY (tenant, execution_id, seq, bucket)",)]
        # and it goes on: a step of a converted execution lands beside its events
        assert store.commit([step("b", 3, MAR, "running", "acme")])[0].name == "OK"
        assert homes(postgres_url, "acme", "b") == {"events_2025_01"}
    finally:
        store.close()


def test_a_housekeeping_round_purges_and_keeps_the_partitions(
    pg: PostgresStore, postgres_url: str, tmp_path: Path
) -> None:
    pg.keep_event_partitions(JAN)
    make(pg, "jan-1", JAN, tenant="acme")
    make(pg, "feb-live", FEB, finished=False, tenant="acme")
    clock = ManualClock(datetime(2025, 6, 15, tzinfo=UTC))
    engine = Engine(pg, clock=clock, activities=ActivityRegistry())
    engine.for_tenant("acme").set_retention(Retention(days=30), by="test")
    background = Background(engine, Settings(home=tmp_path / "home"))

    reports = background.housekeep_now()

    assert [(r.tenant, r.purged) for r in reports if r.purged] == [("acme", 1)]
    names = month_partitions(postgres_url)
    assert {"events_2025_06", "events_2025_07", "events_2025_08"} <= set(names)  # ahead
    assert "events_2025_01" not in names and "events_2025_03" not in names  # emptied, past
    assert "events_2025_02" in names
    assert len(pg.history("feb-live", tenant="acme")) == 2


def test_commits_go_on_while_a_purge_drops_a_month(pg: PostgresStore, postgres_url: str) -> None:
    pg.keep_event_partitions(JAN)
    for n in range(20):
        make(pg, f"jan-{n}", JAN)
    make(pg, "busy", FEB, finished=False)
    outcomes: list[str] = []

    def commit_steps() -> None:
        for n in range(60):
            outcome = pg.commit([step("busy", 2 + 2 * n, FEB, "running", "default")])[0]
            outcomes.append(outcome.name)

    with ThreadPoolExecutor(1) as pool:
        committing = pool.submit(commit_steps)
        purged = pg.purge_executions("default", [f"jan-{n}" for n in range(20)])
        committing.result()

    assert len(purged) == 20
    assert outcomes == ["OK"] * 60
    assert "events_2025_01" not in month_partitions(postgres_url)
    assert len(pg.history("busy", tenant="default")) == 2 + 2 * 60


def test_commits_into_a_month_go_on_while_its_partition_is_created(
    pg: PostgresStore, postgres_url: str
) -> None:
    """Executions of months with no partition commit (into DEFAULT) from four threads while
    housekeeping creates those months' partitions, moving their rows: no commit fails (the
    creation waits for in-flight commits and holds new ones until it is attached), and every
    event ends in its month's partition."""
    months = [datetime(2040, m, 10, tzinfo=UTC) for m in (1, 4, 7, 10)]
    names = [f"m{i}-{k}" for i in range(len(months)) for k in range(2)]
    for name in names:
        make(pg, name, months[int(name[1])], finished=False)
    stores = [PostgresStore(pg.url, max_size=1) for _ in range(4)]
    failures: list[BaseException] = []

    def commit_steps(store: PostgresStore, mine: list[str]) -> None:
        try:
            for n in range(30):
                for name in mine:
                    at = months[int(name[1])]
                    outcome = store.commit([step(name, 2 + 2 * n, at, "running", "default")])[0]
                    assert outcome.name == "OK"
        except BaseException as exc:
            failures.append(exc)

    try:
        with ThreadPoolExecutor(4) as pool:
            running = [pool.submit(commit_steps, s, names[i::4]) for i, s in enumerate(stores)]
            for at in months:
                pg.keep_event_partitions(at)
            for future in running:
                future.result()
    finally:
        for s in stores:
            s.close()
    assert not failures, failures
    for name in names:
        assert homes(postgres_url, "default", name) == {
            partition_name(bucket_of(months[int(name[1])]))
        }
        assert len(pg.history(name, tenant="default")) == 2 + 2 * 30
