"""Checkpoint deltas on every store (`wovyr.store.checkpoints`): a large checkpoint is
written as a base and the changes of each step, and every read (load, claim, the timer
dispatch) gives the whole checkpoint the steps led to; small ones, sealed ones, the first
step after another writer and the step that ends an execution are written whole; the
stored rows stay bounded; and they go with their execution."""

from __future__ import annotations

import contextlib
import itertools
import sqlite3
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from tests.conftest import make_store

from wovyr.events import Event
from wovyr.store.base import ClaimAsk, CommitOutcome, NewExecution, StepWrite, Store
from wovyr.store.checkpoints import DELTA_FROM, MAX_DELTAS
from wovyr.store.postgres import PostgresStore
from wovyr.store.records import CheckpointChanges
from wovyr.store.sqlite import SQLiteStore

T0 = datetime(2030, 1, 1, tzinfo=UTC)
WIDE = 120  # activities: a checkpoint of ~12 KB, over DELTA_FROM


def _activity(i: int, status: str = "pending", output: Any = None) -> dict[str, Any]:
    return {"status": status, "attempt": 0, "output": output, "note": f"activity number {i:04d}"}


def _checkpoint(seq: int, activities: Mapping[str, Any], **head: Any) -> dict[str, Any]:
    return {"seq": seq, "status": "running", "activities": dict(activities), **head}


def _step(
    eid: str,
    before: dict[str, Any],
    after: dict[str, Any],
    *,
    events: int = 1,
    status: str = "running",
    fence: int | None = None,
    changes: bool = True,
    armed: tuple[tuple[str, datetime], ...] = (),
    removed: tuple[str, ...] = (),
) -> StepWrite:
    seq = before["seq"]
    delta = None
    if changes:
        acts = {k: v for k, v in after["activities"].items() if before["activities"].get(k) != v}
        head = {k: v for k, v in after.items() if k != "activities" and before.get(k) != v}
        dropped = [k for k in before if k not in after]
        delta = CheckpointChanges(set=head, drop=dropped, activities=acts)
    return StepWrite(
        execution_id=eid,
        expected_seq=seq,
        events=[Event("Thing", T0, {"i": seq + i}) for i in range(events)],
        checkpoint=after,
        status=status,
        updated_at=T0,
        fence=fence,
        ready=True,
        timers_armed=armed,
        timers_removed=removed,
        changes=delta,
    )


def _create(store: Store, eid: str, checkpoint: dict[str, Any], owner: str | None = None) -> None:
    first = StepWrite(
        execution_id=eid,
        expected_seq=0,
        events=[Event("ExecutionStarted", T0, {})],
        checkpoint=checkpoint,
        status="running",
        updated_at=T0,
        ready=True,
    )
    created, _ = store.create_execution(
        NewExecution(
            id=eid,
            tenant="default",
            workflow="wide",
            version="1",
            definition_hash="h",
            created_at=T0,
            input={},
            first_step=first,
            lease_owner=owner,
            lease_until=T0 + timedelta(seconds=30) if owner else None,
        )
    )
    assert created


@contextlib.contextmanager
def _counting(store: Store) -> Iterator[Callable[[str], int]]:
    """`_parts` over one connection."""
    if isinstance(store, PostgresStore):
        with psycopg.connect(store.url, autocommit=True) as conn:

            def count(eid: str) -> int:
                sql = "SELECT count(*) FROM checkpoint_deltas WHERE execution_id = %s"
                got = conn.execute(sql, (eid,)).fetchone()
                assert got is not None
                return int(got[0])

            yield count
        return
    yield lambda eid: _parts(store, eid)


def _parts(store: Store, eid: str) -> int:
    """The rows an execution's checkpoint takes beside its executions row."""
    if isinstance(store, SQLiteStore):
        with contextlib.closing(sqlite3.connect(store.path)) as conn:
            row = conn.execute(
                "SELECT count(*) FROM checkpoint_parts WHERE execution_id = ?", (eid,)
            ).fetchone()
        return int(row[0])
    if isinstance(store, PostgresStore):
        with psycopg.connect(store.url, autocommit=True) as conn:
            got = conn.execute(
                "SELECT count(*) FROM checkpoint_deltas WHERE execution_id = %s", (eid,)
            ).fetchone()
        assert got is not None
        return int(got[0])
    raise AssertionError(f"not a SQL store: {store!r}")


def _wide(seq: int = 1) -> dict[str, Any]:
    return _checkpoint(seq, {f"a{i}": _activity(i) for i in range(WIDE)})


def _advance(before: dict[str, Any], n: int) -> dict[str, Any]:
    """`before` one step on: activity a<n % WIDE> done, a signal kept in the head."""
    key = f"a{n % WIDE}"
    acts = dict(before["activities"])
    acts[key] = _activity(n % WIDE, "completed", {"n": n, "text": "x" * (n % 7)})
    return _checkpoint(before["seq"] + 1, acts, signals={"go": [n]})


def _started(store: Store, eid: str, steps: int, *, end: bool = False) -> dict[str, Any]:
    """A wide execution created and moved `steps` steps on (each a delta after the first),
    then ended when `end`; its last checkpoint."""
    now = _wide()
    _create(store, eid, now)
    for n in range(steps):
        after = _advance(now, n)
        assert store.commit([_step(eid, now, after)]) == [CommitOutcome.OK]
        now = after
    if end:
        last = {**_advance(now, steps), "status": "completed"}
        assert store.commit([_step(eid, now, last, status="completed")]) == [CommitOutcome.OK]
        now = last
    return now


def _load(store: Store, eid: str) -> dict[str, Any]:
    record = store.load(eid, "default")
    assert record is not None and record.checkpoint is not None
    return record.checkpoint


def test_every_read_gives_the_whole_checkpoint_the_steps_led_to(store: Store) -> None:
    now = _wide()
    _create(store, "e1", now, owner="w1")
    assert _load(store, "e1") == now
    steps = 3 * MAX_DELTAS
    rows: list[int] = []
    with _counting(store) as count:
        for n in range(steps):
            after = _advance(now, n)
            assert store.commit([_step("e1", now, after, fence=1)]) == [CommitOutcome.OK]
            now = after
            assert _load(store, "e1") == now
            rows.append(count("e1"))
    # written as deltas, and compacted: never over the cap
    assert 1 < max(rows) <= MAX_DELTAS + 1
    assert any(b < a for a, b in itertools.pairwise(rows))  # compactions happened
    # a claim (the lease ran out) reads the same whole checkpoint
    (claim,) = store.claim(ClaimAsk("w2", T0 + timedelta(minutes=5), 30.0, 1))
    assert claim.checkpoint == now and claim.seq == now["seq"]
    # and the new owner's first step (this store wrote the base) goes on as deltas again
    after = _advance(now, steps)
    assert store.commit([_step("e1", now, after, fence=claim.fence)]) == [CommitOutcome.OK]
    assert _load(store, "e1") == after


def test_a_top_level_key_dropped_by_a_delta_is_gone(store: Store) -> None:
    now = _checkpoint(1, _wide()["activities"], chain={"root": "r"})
    _create(store, "e1", now)
    after = _advance(now, 0)  # no `chain`
    after["activities"]["a1"] = _activity(1, "running")
    assert store.commit([_step("e1", now, after)]) == [CommitOutcome.OK]
    later = _advance(after, 2)
    assert store.commit([_step("e1", after, later)]) == [CommitOutcome.OK]
    assert _load(store, "e1") == later and "chain" not in later


def test_a_small_checkpoint_and_a_step_without_changes_are_written_whole(store: Store) -> None:
    small = _checkpoint(1, {"a": _activity(0)})
    assert len(str(small)) < DELTA_FROM
    _create(store, "e1", small)
    after = _advance(small, 1)
    assert store.commit([_step("e1", small, after)]) == [CommitOutcome.OK]
    assert _parts(store, "e1") == 0
    assert _load(store, "e1") == after
    now = _wide()
    _create(store, "e2", now)
    for n in range(3):
        after = _advance(now, n)
        assert store.commit([_step("e2", now, after, changes=False)]) == [CommitOutcome.OK]
        now = after
        assert _parts(store, "e2") in (0, 1)  # SQLite: the base; PostgreSQL: none
    assert _load(store, "e2") == now


def test_the_step_that_ends_an_execution_leaves_one_base(store: Store) -> None:
    end = _started(store, "e1", 5, end=True)
    assert _parts(store, "e1") in (0, 1)
    assert _load(store, "e1") == end


def test_a_step_of_another_writer_between_is_built_on_not_lost(
    store: Store, tmp_path: Path
) -> None:
    """A second store object (another process) writes a step between two of this one's:
    the seq check refuses this one's stale step, and its next step, from the other's
    state, is written whole (it did not write that base), then as deltas again."""
    if isinstance(store, SQLiteStore):
        other: Store = SQLiteStore(store.path)
    else:
        assert isinstance(store, PostgresStore)
        other = PostgresStore(store.url, max_size=2)
    try:
        now = _started(store, "e1", 3)
        theirs = _advance(now, 50)
        assert other.commit([_step("e1", now, theirs)]) == [CommitOutcome.OK]
        stale = _advance(now, 51)
        assert store.commit([_step("e1", now, stale)]) == [CommitOutcome.CONFLICT]
        mine = _advance(theirs, 52)
        assert store.commit([_step("e1", theirs, mine)]) == [CommitOutcome.OK]
        assert _parts(store, "e1") in (0, 1)  # whole: the other's deltas and base replaced
        later = _advance(mine, 53)
        assert store.commit([_step("e1", mine, later)]) == [CommitOutcome.OK]
        assert _parts(store, "e1") in (1, 2)  # a delta on it
        assert _load(store, "e1") == later
        assert _load(other, "e1") == later
    finally:
        other.close()


@pytest.mark.postgres
def test_due_timers_fire_on_a_checkpoint_held_as_deltas(
    migrated_postgres_url: str, tmp_path: Path
) -> None:
    """PostgreSQL's dispatch reads and writes due timers' executions in one statement of
    its own (`TimerLocking`)."""
    store = make_store("postgres", tmp_path, migrated_postgres_url)
    try:
        _fire_on_deltas(store)
    finally:
        store.close()


def _fire_on_deltas(store: Any) -> None:
    now = _wide()
    _create(store, "e1", now)
    after = _advance(now, 0)
    armed = (("t1", T0 + timedelta(seconds=5)),)
    assert store.commit([_step("e1", now, after, armed=armed)]) == [CommitOutcome.OK]
    later = _advance(after, 1)
    assert store.commit([_step("e1", after, later)]) == [CommitOutcome.OK]
    seen: list[dict[str, Any]] = []

    def build(timers: Any, records: Mapping[tuple[str, str], Any]) -> list[StepWrite]:
        record = records[("default", "e1")]
        seen.append(record.checkpoint)
        fired = _advance(record.checkpoint, 2)
        return [_step("e1", record.checkpoint, fired, removed=("t1",))]

    done = store.fire_timers(T0 + timedelta(seconds=10), 10, build)
    assert [o for _, o in done] == [CommitOutcome.OK]
    assert seen == [later]
    assert _load(store, "e1") == _advance(later, 2)


def test_the_parts_go_with_their_execution(store: Store) -> None:
    _started(store, "e1", 4, end=True)
    assert store.purge_executions("default", ["e1"]) == ["e1"]
    assert store.load("e1", "default") is None
    assert _parts(store, "e1") == 0


def test_deleting_a_running_executions_row_deletes_its_deltas(store: Store) -> None:
    """What removes an execution that has not ended (a tenant's deletion) takes its delta
    rows with it: the schema's trigger (SQLite) or foreign key (PostgreSQL)."""
    _started(store, "e1", 4)
    assert _parts(store, "e1") >= 2  # deltas on the base
    if isinstance(store, SQLiteStore):
        with contextlib.closing(sqlite3.connect(store.path)) as conn, conn:
            conn.execute("DELETE FROM executions WHERE id = 'e1'")
    else:
        assert isinstance(store, PostgresStore)
        with psycopg.connect(store.url, autocommit=True) as pg:
            pg.execute("DELETE FROM executions WHERE id = 'e1'")
    assert _parts(store, "e1") == 0
