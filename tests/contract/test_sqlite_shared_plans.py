"""The SQLite plans of shared-role queries that must stay index walks (EXPLAIN QUERY PLAN on
a real store): a key lookup probes the primary key per key, never the whole namespace, and
the due schedules use their partial indexes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from wovyr.store.rows import SQLITE
from wovyr.store.sql import role_queries
from wovyr.store.sqlite import SQLiteStore


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Iterator[SQLiteStore]:
    store = SQLiteStore(tmp_path / "wovyr.db")
    yield store
    store.close()


def _plan(store: SQLiteStore, role: str, name: str, params: dict[str, Any]) -> list[str]:
    sql = role_queries(role, SQLITE)[name]
    return [str(row[3]) for row in store._read("EXPLAIN QUERY PLAN " + sql, params)]


def test_memory_keys_probe_the_primary_key(sqlite_store: SQLiteStore) -> None:
    params = {"tenant": "t", "namespace": "n", "keys": '["a", "b"]', "now": 0}
    plan = _plan(sqlite_store, "agent_memory", "memory_get", params)
    assert plan[0].startswith("SCAN wanted")
    assert "(tenant=? AND namespace=? AND key=?)" in plan[1]


def test_due_schedules_walk_their_partial_indexes(sqlite_store: SQLiteStore) -> None:
    plan = " | ".join(_plan(sqlite_store, "schedules", "due_schedules", {"now": 0, "limit": 5}))
    assert "USING INDEX schedules_due" in plan
    assert "USING INDEX schedules_buffered" in plan
