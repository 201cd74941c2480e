"""The migration that makes execution ids per tenant (SQLite 9, PostgreSQL 12) keeps the rows
of a database written at the previous schema: each execution, its events and its timers stay
under their tenant (`default` or the tenant column they had), and the same id can then be
created in another tenant."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg

from wovyr.events import Event
from wovyr.store.base import ClaimAsk, CommitOutcome, NewExecution, StepWrite, Store
from wovyr.store.codec import to_micros
from wovyr.store.shards import stable_shard

T0 = datetime(2030, 1, 1, tzinfo=UTC)
FIRE = T0 + timedelta(minutes=5)

# (tenant, id) of the rows written at the old schema, where ids were one space.
OLD_ROWS = [("default", "order-7"), ("beta", "beta.tick-20300101T091500Z")]


def _read_back(store: Store) -> None:
    for tenant, execution_id in OLD_ROWS:
        record = store.load(execution_id, tenant)
        assert record is not None and record.tenant == tenant and record.seq == 2
        assert record.checkpoint == {"seq": 2}
        assert store.load(execution_id, "someone-else") is None
        assert [(e.seq, e.type) for e in store.history(execution_id, tenant=tenant)] == [
            (1, "ExecutionStarted"),
            (2, "TimerArmed"),
        ]
    due = store.due_timers(FIRE, 10)
    assert sorted((t.tenant, t.execution_id, t.timer_id) for t in due) == sorted(
        (tenant, eid, "wake") for tenant, eid in OLD_ROWS
    )
    claims = store.claim(ClaimAsk("W", T0, 30, 10))
    assert sorted(c.key for c in claims) == sorted(OLD_ROWS)
    # The same id is free in another tenant now, and a step reaches only its own.
    first = StepWrite(
        execution_id="order-7",
        expected_seq=0,
        events=[Event("ExecutionStarted", T0, {"new": True})],
        checkpoint={"seq": 1},
        status="running",
        updated_at=T0,
        tenant="gamma",
    )
    created, record = store.create_execution(
        NewExecution(
            id="order-7",
            tenant="gamma",
            workflow="wf",
            version="1",
            definition_hash="h",
            created_at=T0,
            input={},
            first_step=first,
        )
    )
    assert created and record.tenant == "gamma"
    fire = StepWrite(
        execution_id="order-7",
        expected_seq=2,
        events=[Event("TimerFired", FIRE, {"timer": "wake"})],
        checkpoint={"seq": 3},
        status="running",
        updated_at=FIRE,
        timers_removed=("wake",),
        fence=claims[0].fence if claims[0].key == ("default", "order-7") else claims[1].fence,
        tenant="default",
    )
    assert store.commit([fire]) == [CommitOutcome.OK]
    assert len(store.history("order-7", tenant="gamma")) == 1
    assert len(store.history("order-7", tenant="default")) == 3


# --- SQLite --------------------------------------------------------------------------------


def test_sqlite_keeps_the_rows_of_schema_8(tmp_path: Path) -> None:
    from wovyr.store.sqlite import SQLiteStore
    from wovyr.store.sqlite.store import _migrations, _split_sql

    path = tmp_path / "old.db"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.create_function("wovyr_shard", 1, stable_shard, deterministic=True)
    conn.execute(
        "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY,"
        " applied_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP)"
    )
    for version, script in _migrations():
        if version > 8:
            break
        for statement in _split_sql(script):
            conn.execute(statement)
        conn.execute("INSERT INTO schema_migrations (version) VALUES (?)", (version,))
    for tenant, eid in OLD_ROWS:
        conn.execute(
            "INSERT INTO executions (id, tenant, workflow, version, definition_hash, status,"
            " created_at, updated_at, seq, ready, checkpoint, shard)"
            " VALUES (?, ?, 'wf', '1', 'h', 'running', 0, 0, 2, 1, '{\"seq\": 2}', ?)",
            (eid, tenant, stable_shard(eid)),
        )
        for seq, kind in ((1, "ExecutionStarted"), (2, "TimerArmed")):
            conn.execute(
                "INSERT INTO events (execution_id, seq, type, at, data) VALUES (?, ?, ?, 0, '{}')",
                (eid, seq, kind),
            )
        conn.execute(
            "INSERT INTO timers (execution_id, timer_id, fire_at) VALUES (?, 'wake', ?)",
            (eid, to_micros(FIRE)),
        )
    conn.close()
    store = SQLiteStore(path)
    try:
        assert store.schema_version() == store.latest_migration() >= 9
        _read_back(store)
    finally:
        store.close()


# --- PostgreSQL ----------------------------------------------------------------------------


def test_postgres_keeps_the_rows_of_schema_11(postgres_url: str) -> None:
    from wovyr.store.postgres import PostgresStore
    from wovyr.store.postgres.queries import migrations

    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(
            "CREATE TABLE wovyr_schema_migrations (version integer PRIMARY KEY,"
            " applied_at timestamptz NOT NULL DEFAULT now())"
        )
        for version, script in migrations():
            if version > 11:
                break
            conn.execute(script.encode("utf-8"), prepare=False)
            conn.execute("INSERT INTO wovyr_schema_migrations (version) VALUES (%s)", (version,))
        for tenant, eid in OLD_ROWS:
            conn.execute(
                "INSERT INTO executions (id, tenant, workflow, version, definition_hash, status,"
                " created_at, updated_at, seq, ready, shard, checkpoint)"
                " VALUES (%s, %s, 'wf', '1', 'h', 'running', %s, %s, 2, true, %s,"
                " '{\"seq\": 2}')",
                (eid, tenant, T0, T0, stable_shard(eid)),
            )
            for seq, kind in ((1, "ExecutionStarted"), (2, "TimerArmed")):
                conn.execute(
                    "INSERT INTO events (execution_id, seq, type, at, data)"
                    " VALUES (%s, %s, %s, %s, '{}')",
                    (eid, seq, kind, T0),
                )
            conn.execute(
                "INSERT INTO timers (execution_id, timer_id, fire_at) VALUES (%s, 'wake', %s)",
                (eid, FIRE),
            )
    store = PostgresStore(postgres_url)
    try:
        assert store.schema_version() == max(v for v, _ in migrations()) >= 12
        _read_back(store)
        # Writers always name the tenant: the new columns keep no default.
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            rows: Any = conn.execute(
                "SELECT table_name, column_default FROM information_schema.columns"
                " WHERE table_schema = current_schema() AND column_name = 'tenant'"
                " AND table_name IN ('events', 'timers') ORDER BY 1"
            ).fetchall()
        assert rows == [("events", None), ("timers", None)]
    finally:
        store.close()
