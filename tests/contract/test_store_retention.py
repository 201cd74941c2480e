"""Retention in the store contract (SQLite, PostgreSQL): `find_expired` finds the
finished executions that ended before a time, oldest first, per tenant and workflow, page
by page; `purge_executions` deletes those (with events, timers, labels, stream chunks) and
skips running ones and other tenants'; and on SQLite and PostgreSQL `find_expired` walks
its partial index (EXPLAIN)."""

from __future__ import annotations

import sqlite3
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest

from wovyr.events import Event
from wovyr.store.audit import AuditEntry
from wovyr.store.base import ExecutionFilter, NewExecution, StepWrite, Store
from wovyr.store.retention import ExpiredFilter
from wovyr.store.sqlite import SQLiteStore
from wovyr.store.streams import NewChunk, StreamAppend

from .test_store_contract import T0


def _step(
    execution_id: str, seq: int, *, status: str, at: datetime, tenant: str, timers: bool = False
) -> StepWrite:
    return StepWrite(
        execution_id=execution_id,
        expected_seq=seq,
        events=[Event("Thing", at, {"seq": seq + 1})],
        checkpoint={"seq": seq + 1},
        status=status,
        updated_at=at,
        ready=status == "running",
        timers_armed=(("t1", at + timedelta(days=900)),) if timers else (),
        tenant=tenant,
    )


def make(
    store: Store,
    execution_id: str,
    *,
    finished: datetime | None,
    status: str = "completed",
    tenant: str = "default",
    workflow: str = "wf",
    labels: dict[str, str] | None = None,
) -> None:
    """An execution started at T0 with a label, a timer and a stream chunk, then (with
    `finished`) ended with `status` at that time."""
    new = NewExecution(
        id=execution_id,
        tenant=tenant,
        workflow=workflow,
        version="1",
        definition_hash="h",
        created_at=T0,
        input={},
        first_step=_step(execution_id, 0, status="running", at=T0, tenant=tenant, timers=True),
        labels=labels if labels is not None else {"team": "a", "run": execution_id},
        lease_owner="w1",
        lease_until=T0 + timedelta(minutes=1),
    )
    created, record = store.create_execution(new)
    assert created
    chunks = [NewChunk("ask", 1, 1, "attempt"), NewChunk("ask", 1, 1, "text", "hi")]
    assert store.append_stream(StreamAppend(tenant, execution_id, record.fence, chunks, T0))
    if finished is not None:
        end = _step(execution_id, 1, status=status, at=finished, tenant=tenant)
        assert store.commit([end])[0].name == "OK"


def expired(store: Store, tenant: str, workflow: str | None, before: datetime) -> list[str]:
    return [e.id for e in store.find_expired(ExpiredFilter(tenant, workflow, before, 100))]


def test_find_expired_lists_old_finished_executions_oldest_first(store: Store) -> None:
    days = [timedelta(days=d) for d in range(10)]
    make(store, "c", finished=T0 + days[3], status="completed")
    make(store, "f", finished=T0 + days[1], status="failed")
    make(store, "x", finished=T0 + days[2], status="cancelled")
    make(store, "n", finished=T0 + days[4], status="continued")
    make(store, "young", finished=T0 + days[9])
    make(store, "running", finished=None)
    make(store, "other-wf", finished=T0 + days[1], workflow="wf2")
    make(store, "c", finished=T0 + days[1], tenant="acme")  # same id, other tenant

    assert expired(store, "default", None, T0 + days[5]) == ["f", "other-wf", "x", "c", "n"]
    assert expired(store, "default", "wf", T0 + days[5]) == ["f", "x", "c", "n"]
    assert expired(store, "default", "wf2", T0 + days[5]) == ["other-wf"]
    assert expired(store, "default", None, T0 + days[1]) == []  # strictly before
    assert expired(store, "acme", None, T0 + days[5]) == ["c"]
    assert expired(store, "nobody", None, T0 + days[5]) == []
    first = ExpiredFilter("default", None, T0 + days[5], 2)
    found = store.find_expired(first)
    assert [(e.id, e.workflow, e.status) for e in found] == [
        ("f", "wf", "failed"),
        ("other-wf", "wf2", "completed"),
    ]
    assert found[0].finished_at == T0 + days[1]
    rest = store.find_expired(replace(first, after=(found[-1].finished_at, found[-1].id)))
    assert [e.id for e in rest] == ["x", "c"]


def test_purge_deletes_finished_executions_with_everything_kept_for_them(store: Store) -> None:
    old = T0 + timedelta(days=1)
    make(store, "done", finished=old)
    make(store, "live", finished=None)
    make(store, "done", finished=old, tenant="acme")  # same id in another tenant
    make(store, "keep", finished=old)
    entry = AuditEntry(old, "default", "local:test", "executions.purge", "wf", {"count": 1})

    purged = store.purge_executions("default", ["done", "live", "missing", "done"], audit=entry)

    assert purged == ["done"]  # the running one and the unknown one are skipped
    assert store.load("done", "default") is None
    assert store.history("done", tenant="default") == []
    assert store.read_stream("default", "done") == []
    timers = store.due_timers(T0 + timedelta(days=1000), 10)
    assert sorted((t.tenant, t.execution_id) for t in timers) == [
        ("acme", "done"),
        ("default", "keep"),
        ("default", "live"),
    ]
    labelled = ExecutionFilter(tenant="default", labels=(("team", "a"),), limit=10)
    assert sorted(r.id for r in store.list_executions(labelled).items) == ["keep", "live"]
    by_run = ExecutionFilter(tenant="default", labels=(("run", "done"),), limit=10)
    assert store.list_executions(by_run).items == []
    # the running one, the other finished one and the other tenant's are untouched
    live = store.load("live", "default")
    assert live is not None and live.status == "running"
    assert len(store.history("live", tenant="default")) == 1
    assert len(store.read_stream("default", "live")) == 2
    assert store.load("keep", "default") is not None
    assert len(store.history("done", tenant="acme")) == 2
    assert len(store.read_stream("acme", "done")) == 2
    acme = ExecutionFilter(tenant="acme", labels=(("run", "done"),), limit=10)
    assert [r.id for r in store.list_executions(acme).items] == ["done"]
    # the purge is audited in its own transaction; a purge of nothing is not
    records = store.audit_records(tenant="default")
    assert [r.action for r in records] == ["executions.purge"]
    assert store.purge_executions("default", ["done", "live"], audit=entry) == []
    assert len(store.audit_records(tenant="default")) == 1


def test_a_purged_id_can_be_started_again(store: Store) -> None:
    make(store, "e1", finished=T0 + timedelta(days=1))
    assert store.purge_executions("default", ["e1"]) == ["e1"]
    make(store, "e1", finished=None)
    record = store.load("e1", "default")
    assert record is not None and record.status == "running" and record.seq == 1


def _fill(store: Store, n: int) -> None:
    for i in range(n):
        make(
            store,
            f"x{i:04d}",
            finished=None if i % 2 else T0 + timedelta(hours=i),
            workflow=f"wf{i % 5}",
            labels={},
        )


def test_sqlite_find_expired_walks_its_partial_index(tmp_path: Path) -> None:
    from wovyr.store.codec import to_micros
    from wovyr.store.rows import SQLITE
    from wovyr.store.sql import role_queries

    store = SQLiteStore(tmp_path / "plans.db")
    try:
        _fill(store, 100)

        def plan(workflow: str | None) -> str:
            name = "find_expired" if workflow is None else "find_expired_workflow"
            params = {
                "tenant": "default",
                "workflow": workflow,
                "before": to_micros(T0 + timedelta(days=3)),
                "after_at": to_micros(T0),
                "after_id": "x",
                "limit": 50,
            }
            sql = role_queries("retention", SQLITE)[name]
            with sqlite3.connect(store.path) as conn:
                rows = conn.execute("EXPLAIN QUERY PLAN " + sql, params).fetchall()
            return "\n".join(str(r[-1]) for r in rows)

        tenant_wide = plan(None)
        assert (
            "USING INDEX executions_finished (tenant=? AND (updated_at,id)>(?,?) AND updated_at<?)"
            in tenant_wide
        ), tenant_wide
        assert "SCAN" not in tenant_wide and "TEMP B-TREE" not in tenant_wide, tenant_wide
        by_workflow = plan("wf2")
        assert "USING INDEX executions_finished_by_workflow (tenant=? AND workflow=?" in (
            by_workflow
        ), by_workflow
        assert "SCAN" not in by_workflow and "TEMP B-TREE" not in by_workflow, by_workflow
        assert len(expired(store, "default", "wf2", T0 + timedelta(days=3))) == 7
    finally:
        store.close()


@pytest.mark.postgres
def test_postgres_find_expired_walks_its_partial_index(postgres_url: str) -> None:
    from wovyr.store.postgres import PostgresStore
    from wovyr.store.rows import POSTGRES
    from wovyr.store.sql import role_queries

    store = PostgresStore(postgres_url, max_size=2)
    try:
        _fill(store, 100)
        base: dict[str, Any] = {
            "tenant": "default",
            "before": T0 + timedelta(days=3),
            "after_at": T0,
            "after_id": "",
            "limit": 50,
        }

        def plan(name: str, **given: Any) -> str:
            with psycopg.connect(postgres_url, autocommit=True) as conn:
                conn.execute("ANALYZE executions")
                conn.execute("SET enable_seqscan = off")
                # a 100-row table: the planner would sort a bitmap scan's few rows; without
                # bitmaps it shows that the index gives the order (no Sort) on its own
                conn.execute("SET enable_bitmapscan = off")
                rows = conn.execute(
                    "EXPLAIN " + role_queries("retention", POSTGRES)[name],
                    {**base, **given},
                    prepare=False,
                ).fetchall()
            return "\n".join(row[0] for row in rows)

        tenant_wide = plan("find_expired")
        assert "Index Scan using executions_finished on" in tenant_wide, tenant_wide
        assert "Index Cond: ((tenant = 'default'::text) AND (updated_at <" in tenant_wide
        assert "Seq Scan" not in tenant_wide and "Sort" not in tenant_wide, tenant_wide
        by_workflow = plan("find_expired_workflow", workflow="wf2")
        assert "Index Scan using executions_finished_by_workflow" in by_workflow, by_workflow
        assert "Seq Scan" not in by_workflow and "Sort" not in by_workflow, by_workflow
        assert len(expired(store, "default", "wf2", T0 + timedelta(days=3))) == 7
    finally:
        store.close()
