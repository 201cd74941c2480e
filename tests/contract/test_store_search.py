"""Search in the store contract (SQLite, PostgreSQL): labels written with an execution
and filtered on (one or several, paged, per tenant), id prefixes, workflow names by
substring, the reruns of an execution; and, on SQLite and PostgreSQL, the plans of those
queries use an index (EXPLAIN QUERY PLAN / EXPLAIN)."""

from __future__ import annotations

import sqlite3
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest

from wovyr.store.base import DefinitionRecord, ExecutionFilter, NewExecution, Store
from wovyr.store.sqlite import SQLiteStore

from .test_store_contract import T0, step


def new(
    execution_id: str,
    minute: int,
    *,
    tenant: str = "default",
    workflow: str = "wf",
    labels: dict[str, str] | None = None,
    rerun_of: str | None = None,
) -> NewExecution:
    at = T0 + timedelta(minutes=minute)
    return NewExecution(
        id=execution_id,
        tenant=tenant,
        workflow=workflow,
        version="1",
        definition_hash="h",
        created_at=at,
        input={},
        first_step=step(execution_id, 0, at=at, tenant=tenant),
        labels=labels or {},
        rerun_of=rerun_of,
    )


def ids(store: Store, **given: Any) -> list[str]:
    return [r.id for r in store.list_executions(ExecutionFilter(**given)).items]


def test_labels_are_kept_with_the_execution_and_filtered_on(store: Store) -> None:
    for i in range(6):
        labels = {"customer": "acme" if i % 2 == 0 else "globex", "tier": "gold" if i < 3 else ""}
        store.create_execution(new(f"e{i}", i, labels=labels))
    store.create_execution(new("plain", 10))  # no labels: no label rows
    store.create_execution(new("e9", 11, tenant="other", labels={"customer": "acme"}))

    assert ids(store, labels=(("customer", "acme"),)) == ["e4", "e2", "e0"]
    assert ids(store, labels=(("customer", "acme"), ("tier", "gold"))) == ["e2", "e0"]
    assert ids(store, labels=(("customer", "acme"),), status="failed") == []
    assert ids(store, labels=(("customer", "nobody"),)) == []
    assert ids(store, tenant="other", labels=(("customer", "acme"),)) == ["e9"]
    first = store.list_executions(ExecutionFilter(labels=(("customer", "acme"),), limit=2))
    assert [r.id for r in first.items] == ["e4", "e2"] and first.next_cursor is not None
    rest = ExecutionFilter(labels=(("customer", "acme"),), limit=2, cursor=first.next_cursor)
    page = store.list_executions(rest)
    assert [r.id for r in page.items] == ["e0"] and page.next_cursor is None
    assert first.items[0].labels == {"customer": "acme", "tier": ""}  # shown in lists
    loaded = store.load("e1", "default")
    assert loaded is not None and loaded.labels == {"customer": "globex", "tier": "gold"}
    plain = store.load("plain", "default")
    assert plain is not None and plain.labels == {}


def test_an_id_prefix_selects_the_ids_that_start_with_it(store: Store) -> None:
    for i, ident in enumerate(["ab-1", "ab-2", "abc", "b-ab", "AB-3"]):
        store.create_execution(new(ident, i))
    store.create_execution(new("ab-9", 9, tenant="other"))
    assert ids(store, id_prefix="ab") == ["abc", "ab-2", "ab-1"]  # case matters in ids
    assert ids(store, id_prefix="ab-", limit=1) == ["ab-2"]
    assert ids(store, id_prefix="ab-2") == ["ab-2"]
    assert ids(store, id_prefix="zz") == []
    assert ids(store, tenant="other", id_prefix="ab") == ["ab-9"]


def test_workflow_names_are_searched_by_substring_ignoring_case(store: Store) -> None:
    for tenant, name, digest in [
        ("default", "Order-Fulfilment", "h1"),
        ("default", "order-fulfilment", "h2"),
        ("default", "refund", "h3"),
        ("default", "Refund", "h3b"),
        ("other", "order-audit", "h4"),
    ]:
        store.put_definition(DefinitionRecord(digest, name, "1", "{}", T0, tenant))
    assert store.workflow_names("default", "ORDER") == ["Order-Fulfilment", "order-fulfilment"]
    assert store.workflow_names("default", "fund") == ["Refund", "refund"]
    assert store.workflow_names("default", "fund", limit=1) == ["Refund"]
    assert store.workflow_names("default", "audit") == []  # another tenant's
    assert store.workflow_names("other", "order") == ["order-audit"]


def test_several_workflows_are_listed_as_one_page(store: Store) -> None:
    for i in range(7):
        store.create_execution(new(f"w{i}", i, workflow=["a", "b", "c"][i % 3]))
    first = store.list_executions(ExecutionFilter(workflows=("a", "c"), limit=3))
    assert [r.id for r in first.items] == ["w6", "w5", "w3"]
    rest = ExecutionFilter(workflows=("a", "c"), limit=3, cursor=first.next_cursor)
    assert ids(store, workflows=("a", "c"), limit=3, cursor=first.next_cursor) == ["w2", "w0"]
    assert store.list_executions(rest).next_cursor is None
    assert ids(store, workflows=()) == []
    assert ids(store, workflows=("b",), status="failed") == []


def test_the_reruns_of_an_execution_are_listed(store: Store) -> None:
    store.create_execution(new("o", 0))
    store.create_execution(new("r1", 1, rerun_of="o"))
    store.create_execution(new("r2", 2, rerun_of="o"))
    store.create_execution(new("r3", 3, rerun_of="o", tenant="other"))
    assert ids(store, rerun_of="o") == ["r2", "r1"]
    assert ids(store, tenant="other", rerun_of="o") == ["r3"]
    assert ids(store, rerun_of="r1") == []


# --- the plans -------------------------------------------------------------------------


def _fill(store: Store, n: int) -> None:
    for i in range(n):
        labels = {"customer": f"c{i % 50}"} if i % 3 == 0 else {}
        store.create_execution(
            new(f"x{i:05d}", i, workflow=f"wf{i % 20}", labels=labels, rerun_of=None)
        )


def _sqlite_plan(store: SQLiteStore, query: ExecutionFilter) -> str:
    from wovyr.store.sqlite.store import _list_sql

    sql, params = _list_sql(query)
    with sqlite3.connect(store.path) as conn:
        rows = conn.execute("EXPLAIN QUERY PLAN " + sql, params).fetchall()
    return "\n".join(str(r[-1]) for r in rows)


def test_sqlite_searches_use_an_index(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "plans.db")
    try:
        _fill(store, 300)
        by_label = _sqlite_plan(store, ExecutionFilter(labels=(("customer", "c7"),)))
        assert "SEARCH l USING PRIMARY KEY (tenant=? AND key=? AND value=?)" in by_label
        assert "SCAN" not in by_label and "TEMP B-TREE" not in by_label, by_label
        two = _sqlite_plan(store, ExecutionFilter(labels=(("customer", "c7"), ("x", "y"))))
        assert "SEARCH l USING PRIMARY KEY" in two and "SCAN" not in two, two
        by_prefix = _sqlite_plan(store, ExecutionFilter(id_prefix="x0001"))
        assert "SEARCH executions USING INDEX sqlite_autoindex_executions_1" in by_prefix
        assert "(tenant=? AND id>? AND id<?)" in by_prefix, by_prefix
        by_name = _sqlite_plan(store, ExecutionFilter(workflows=("wf3", "wf13")))
        assert by_name.count("executions_by_workflow (tenant=? AND workflow=?)") == 2, by_name
        assert "SCAN executions" not in by_name, by_name
        reruns = _sqlite_plan(store, ExecutionFilter(rerun_of="x00001"))
        assert "executions_by_rerun_of" in reruns, reruns
        with sqlite3.connect(store.path) as conn:
            names = conn.execute(
                "EXPLAIN QUERY PLAN SELECT DISTINCT name FROM definitions WHERE tenant = ?"
                " AND instr(lower(name), ?) > 0 ORDER BY name LIMIT ?",
                ("default", "wf", 50),
            ).fetchall()
        assert "definitions_by_name" in "\n".join(str(r[-1]) for r in names)
        # and the answers are right on the bigger set
        assert ids(store, labels=(("customer", "c7"),), limit=3) == ["x00207", "x00057"]
        assert ids(store, id_prefix="x0029") == [f"x0029{i}" for i in range(9, -1, -1)]
        found = ids(store, workflows=("wf3", "wf13"), limit=4)
        assert found == ["x00293", "x00283", "x00273", "x00263"]
    finally:
        store.close()


@pytest.mark.postgres
def test_postgres_searches_use_an_index(postgres_url: str) -> None:
    from wovyr.store.postgres import PostgresStore
    from wovyr.store.postgres.queries import queries

    store = PostgresStore(postgres_url, max_size=2)
    try:
        _fill(store, 300)
        base: dict[str, Any] = dict.fromkeys(
            (
                "workflow",
                "workflows",
                "status",
                "waiting",
                "parent_id",
                "rerun_of",
                "id_prefix",
                "id_upto",
                "created_after",
                "created_before",
                "cursor_at",
                "cursor_id",
            )
        )

        def plan(name: str, **given: Any) -> str:
            with psycopg.connect(postgres_url, autocommit=True) as conn:
                conn.execute("ANALYZE executions; ANALYZE execution_labels")
                conn.execute("SET enable_seqscan = off")
                rows = conn.execute(
                    "EXPLAIN " + queries()[name],
                    {**base, "tenant": "default", "limit": 51, **given},
                    prepare=False,
                ).fetchall()
            return "\n".join(row[0] for row in rows)

        by_label = plan("list_by_label", label_key="customer", label_value="c7", more_labels=None)
        assert "execution_labels_pkey" in by_label and "Seq Scan" not in by_label, by_label
        assert "Sort" not in by_label.split("->")[0] + by_label.split("->")[1], by_label
        by_prefix = plan("list_executions", id_prefix="x0001", id_upto="x0001\U0010ffff")
        assert "executions_pkey" in by_prefix and "Seq Scan" not in by_prefix, by_prefix
        reruns = plan("list_executions", rerun_of="x00001")
        assert "executions_by_rerun_of" in reruns, reruns
        names = plan("list_by_workflows", workflows=["wf3", "wf13"])
        assert "executions_by_workflow" in names and "Seq Scan" not in names, names
        assert ids(store, labels=(("customer", "c7"),), limit=3) == ["x00207", "x00057"]
        assert ids(store, id_prefix="x0029") == [f"x0029{i}" for i in range(9, -1, -1)]
        found = ids(store, workflows=("wf3", "wf13"), limit=4)
        assert found == ["x00293", "x00283", "x00273", "x00263"]
    finally:
        store.close()


def test_a_store_without_labels_writes_no_label_rows(tmp_path: Path) -> None:
    """The hot path: a start without labels adds no row and no index entry for them."""
    store = SQLiteStore(tmp_path / "nolabels.db")
    try:
        store.create_execution(new("a", 0))
        store.create_execution(replace(new("b", 1), labels={"k": "v"}))
        with sqlite3.connect(store.path) as conn:
            rows = conn.execute("SELECT execution_id FROM execution_labels").fetchall()
            column = conn.execute("SELECT id, labels FROM executions ORDER BY id").fetchall()
        assert rows == [("b",)]
        assert column == [("a", None), ("b", '{"k":"v"}')]
    finally:
        store.close()
