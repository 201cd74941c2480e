"""The stream journal on every store: chunks numbered per execution in commit order, read
after any number, refused once the writer's fence moved, scoped by tenant, and gone with
their execution (SQL stores)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from tests.contract.test_store_contract import create

from wovyr.store.base import ClaimAsk, Store
from wovyr.store.sqlite import SQLiteStore
from wovyr.store.streams import NewChunk, StreamAppend

T0 = datetime(2030, 1, 1, tzinfo=UTC)


def _pieces(attempt: int, *texts: str) -> list[NewChunk]:
    return [NewChunk("ask", attempt, 1, "attempt")] + [
        NewChunk("ask", attempt, 1, "text", t) for t in texts
    ]


def _fence(store: Store, execution_id: str, tenant: str = "default") -> int:
    record = store.load(execution_id, tenant)
    assert record is not None
    return record.fence


def test_chunks_are_numbered_in_order_and_read_after_any_number(store: Store) -> None:
    create(store, "e1", owner="w1")
    fence = _fence(store, "e1")
    assert store.append_stream(StreamAppend("default", "e1", fence, _pieces(1, "Hel", "lo"), T0))
    assert store.append_stream(StreamAppend("default", "e1", fence, _pieces(2, " wor", "ld"), T0))
    chunks = store.read_stream("default", "e1")
    assert [c.n for c in chunks] == [1, 2, 3, 4, 5, 6]
    assert [(c.kind, c.attempt, c.text) for c in chunks] == [
        ("attempt", 1, ""),
        ("text", 1, "Hel"),
        ("text", 1, "lo"),
        ("attempt", 2, ""),
        ("text", 2, " wor"),
        ("text", 2, "ld"),
    ]
    assert chunks[0].at == T0 and chunks[0].activity == "ask" and chunks[0].turn == 1
    assert [c.text for c in store.read_stream("default", "e1", after=4)] == [" wor", "ld"]
    assert [c.n for c in store.read_stream("default", "e1", after=1, limit=2)] == [2, 3]
    assert store.read_stream("default", "e1", after=6) == []


def test_an_append_with_a_moved_fence_writes_nothing(store: Store) -> None:
    create(store, "e1", owner="w1")
    fence = _fence(store, "e1")
    (claim,) = store.claim(ClaimAsk("w2", T0 + timedelta(minutes=5), 30.0, 1))  # the lease expired
    assert claim.fence == fence + 1
    assert not store.append_stream(StreamAppend("default", "e1", fence, _pieces(1, "late"), T0))
    assert store.read_stream("default", "e1") == []
    rerun = [NewChunk("ask", 1, 1, "attempt", "", 1), NewChunk("ask", 1, 1, "text", "now", 1)]
    assert store.append_stream(StreamAppend("default", "e1", claim.fence, rerun, T0))
    chunks = store.read_stream("default", "e1")
    assert [(c.kind, c.attempt, c.recovery, c.text) for c in chunks] == [
        ("attempt", 1, 1, ""),
        ("text", 1, 1, "now"),
    ]
    assert not store.append_stream(StreamAppend("default", "missing", 0, _pieces(1, "x"), T0))


def test_another_tenants_stream_is_empty(store: Store) -> None:
    create(store, "same", tenant="a", owner="w1")
    create(store, "same", tenant="b", owner="w1")
    assert store.append_stream(
        StreamAppend("a", "same", _fence(store, "same", "a"), _pieces(1, "A"), T0)
    )
    assert store.read_stream("b", "same") == []
    assert store.append_stream(
        StreamAppend("b", "same", _fence(store, "same", "b"), _pieces(1, "B"), T0)
    )
    assert [c.text for c in store.read_stream("a", "same")] == ["", "A"]
    assert [(c.n, c.text) for c in store.read_stream("b", "same")] == [(1, ""), (2, "B")]


def test_chunks_go_with_their_execution(store: Store) -> None:
    create(store, "e1", owner="w1")
    create(store, "e2", owner="w1")
    for execution_id in ("e1", "e2"):
        fence = _fence(store, execution_id)
        assert store.append_stream(
            StreamAppend("default", execution_id, fence, _pieces(1, "x"), T0)
        )
    if isinstance(store, SQLiteStore):
        import sqlite3

        with sqlite3.connect(store.path) as conn:
            conn.execute("DELETE FROM events WHERE execution_id = 'e1'")
            conn.execute("DELETE FROM executions WHERE id = 'e1'")
    else:
        import psycopg

        with psycopg.connect(store.url, autocommit=True) as conn:
            conn.execute("DELETE FROM events WHERE execution_id = 'e1'")
            conn.execute("DELETE FROM executions WHERE id = 'e1'")
    assert store.read_stream("default", "e1") == []
    assert len(store.read_stream("default", "e2")) == 2
