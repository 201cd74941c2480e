"""Group commit on the embedded store: starts and step commits that arrive while another
transaction holds the write lock are written together, in one transaction (one fsync),
each in a savepoint of its own: a refused start or a rolled-back atomic batch undoes only
its own writes and answers its own caller; the others land and are answered as before.

The writes are made to queue deterministically: the test holds the store's write lock
(as a committing transaction would) until every thread has handed in its write."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import pytest

from wovyr.errors import QuotaExceeded, StoreError
from wovyr.events import ExecutionStarted, SignalReceived
from wovyr.store.audit import AuditEntry
from wovyr.store.base import CommitOutcome, NewExecution, StepWrite
from wovyr.store.records import Debit
from wovyr.store.sqlite import SQLiteStore

AT = datetime(2030, 1, 1, 9, tzinfo=UTC)


def _new(execution_id: str, **kw: Any) -> NewExecution:
    event = ExecutionStarted(
        workflow="w",
        version="1",
        definition_hash="h",
        input={},
        parent_id=None,
        timeout=None,
        activities=[],
    ).at(AT)
    step = StepWrite(execution_id, 0, [event], {"seq": 1}, "running", AT, ready=True, tenant="t1")
    audit = AuditEntry(AT, "t1", "local:tester", "execution.start", execution_id, {})
    new = NewExecution(execution_id, "t1", "w", "1", "h", AT, {}, step, audit=audit)
    return replace(new, **kw)


def _signal(execution_id: str, expected_seq: int) -> StepWrite:
    event = SignalReceived(name="go", payload=None).at(AT)
    return StepWrite(execution_id, expected_seq, [event], {}, "running", AT, tenant="t1")


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteStore]:
    s = SQLiteStore(tmp_path / "group.db")
    yield s
    s.close()


def queued_together(store: SQLiteStore, calls: list[Callable[[], Any]]) -> list[Any]:
    """Run `calls` on threads of their own while the write lock is held, release it once all
    have handed in their writes, and return each call's answer (or the exception raised)."""
    answers: list[Any] = [None] * len(calls)

    def run(i: int) -> None:
        try:
            answers[i] = calls[i]()
        except Exception as exc:  # answered to the test, as to the caller
            answers[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    with store._write_lock:
        for t in threads:
            t.start()
        handed_in = threading.Event()
        for _ in range(10_000):  # bounded: each thread queues its write before the lock
            with store._turns_lock:
                if len(store._turns) == len(calls):
                    handed_in.set()
                    break
            handed_in.wait(0.001)
        assert handed_in.is_set(), "the writes were not handed in"
    for t in threads:
        t.join(timeout=30)
        assert not t.is_alive()
    return answers


def test_writes_that_queue_meanwhile_share_one_transaction(store: SQLiteStore) -> None:
    store.create_execution(_new("base"))
    commits, groups = store.commits, list(store.group_sizes)
    answers = queued_together(
        store,
        [lambda i=i: store.create_execution(_new(f"e{i}")) for i in range(5)]
        + [lambda: store.commit([_signal("base", 1)])],
    )
    assert [a[0] for a in answers[:5]] == [True] * 5
    assert answers[5] == [CommitOutcome.OK]
    assert store.commits == commits + 1  # one transaction, one fsync, for six writes
    assert store.group_sizes[5] == groups[5] + 1
    assert all(store.load(f"e{i}", "t1") is not None for i in range(5))
    assert store.load("base", "t1").seq == 2  # type: ignore[union-attr]
    assert [r.target for r in store.audit_records()] == ["base"] + [f"e{i}" for i in range(5)]


def test_a_refused_write_undoes_only_its_own_writes(store: SQLiteStore) -> None:
    store.create_execution(_new("a"))
    store.create_execution(_new("b"))
    full = Debit("executions", 1, date(2030, 1, 1), 0)  # a quota with no room left
    answers = queued_together(
        store,
        [
            lambda: store.create_execution(_new("ok1")),
            lambda: store.create_execution(_new("refused", debits=(full,))),
            # atomic: the first step applies, the second conflicts, so neither is written
            lambda: store.commit([_signal("a", 1), _signal("b", 7)], atomic=True),
            lambda: store.commit([_signal("b", 1)]),
            lambda: store.create_execution(_new("ok2")),
        ],
    )
    assert answers[0][0] is True and answers[4][0] is True
    assert isinstance(answers[1], QuotaExceeded)
    assert answers[2] == [CommitOutcome.OK, CommitOutcome.CONFLICT]
    assert answers[3] == [CommitOutcome.OK]
    assert store.load("refused", "t1") is None
    assert store.load("a", "t1").seq == 1  # type: ignore[union-attr]  # rolled back
    assert store.load("b", "t1").seq == 2  # type: ignore[union-attr]
    assert len(store.history("a", 0, 100, tenant="t1")) == 1
    # the refused start left no audit record and the chain has no gap
    targets = [r.target for r in store.audit_records()]
    assert "refused" not in targets and {"ok1", "ok2"} <= set(targets)
    assert [r.seq for r in store.audit_records()] == list(range(1, len(targets) + 1))


def test_a_failed_commit_fails_every_write_of_the_transaction(store: SQLiteStore) -> None:
    store.create_execution(_new("a"))

    def no_commit(action: int, arg1: str | None, *_: object) -> int:
        refused = action == sqlite3.SQLITE_TRANSACTION and arg1 == "COMMIT"
        return sqlite3.SQLITE_DENY if refused else sqlite3.SQLITE_OK

    store._writer.set_authorizer(no_commit)  # the writes apply, their COMMIT is refused
    try:
        answers = queued_together(
            store, [lambda i=i: store.create_execution(_new(f"e{i}")) for i in range(3)]
        )
    finally:
        store._writer.set_authorizer(None)
    assert all(isinstance(a, StoreError) for a in answers), answers
    assert all(store.load(f"e{i}", "t1") is None for i in range(3))  # rolled back, all
    assert store.create_execution(_new("after"))[0]  # and the store goes on
