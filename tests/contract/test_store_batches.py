"""Contract, continued: a batch of steps of many executions (what a worker's group commit
sends) behaves on every store as each step alone would, outcome by outcome: PostgreSQL
writes such a batch as one set-based statement, the others step by step."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from wovyr.events import Event
from wovyr.store.base import ClaimAsk, CommitOutcome, NewExecution, StepWrite, Store

T0 = datetime(2030, 1, 1, tzinfo=UTC)


def step(
    execution_id: str,
    seq: int,
    events: int = 1,
    *,
    fence: int | None = None,
    ready: bool = True,
    release: bool = False,
    armed: tuple[tuple[str, datetime], ...] = (),
    removed: tuple[str, ...] = (),
    output: object = None,
) -> StepWrite:
    return StepWrite(
        execution_id=execution_id,
        expected_seq=seq,
        events=[
            Event("Thing", T0 + timedelta(seconds=i), {"n": seq + i, "q": 'a "quoted" \\ text'})
            for i in range(events)
        ],
        checkpoint={"seq": seq + events, "who": execution_id, "nested": {"b": 1, "a": [2]}},
        status="running" if ready else "waiting",
        updated_at=T0,
        fence=fence,
        ready=ready,
        release_lease=release,
        timers_armed=armed,
        timers_removed=removed,
        output=output,
    )


def create(store: Store, execution_id: str, *, owner: str | None = None) -> None:
    created, _ = store.create_execution(
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
    assert created


def test_a_batch_of_many_executions_checks_each_step_on_its_own(store: Store) -> None:
    for name in ("ok", "stale", "lost", "timers", "released"):
        create(store, name)
    [lost] = store.claim(ClaimAsk("A", T0, 30, 10, only=["lost"]))
    [held] = store.claim(ClaimAsk("A", T0, 30, 10, only=["released"]))
    t1, t2 = T0 + timedelta(minutes=1), T0 + timedelta(minutes=2)
    store.commit([step("timers", 1, armed=(("old", t1), ("kept", t2)))])
    batch = [
        step("ok", 1, events=3, output={"b": 1, "a": 2}),
        step("stale", 5),  # wrong sequence
        step("lost", 1, fence=lost.fence + 1),  # somebody else's fence
        step("missing", 0),
        step("timers", 2, armed=(("new", t1), ("kept", t2)), removed=("old", "kept")),
        step("released", 1, fence=held.fence, ready=False, release=True),
    ]
    assert store.commit(batch) == [
        CommitOutcome.OK,
        CommitOutcome.CONFLICT,
        CommitOutcome.LEASE_LOST,
        CommitOutcome.NOT_FOUND,
        CommitOutcome.OK,
        CommitOutcome.OK,
    ]
    ok = store.load("ok", "default")
    assert ok is not None and ok.seq == 4 and ok.output == {"b": 1, "a": 2}
    assert ok.checkpoint == {"seq": 4, "who": "ok", "nested": {"b": 1, "a": [2]}}
    history = store.history("ok", tenant="default")
    assert [e.seq for e in history] == [1, 2, 3, 4]
    assert [e.data["n"] for e in history[1:]] == [1, 2, 3]
    assert history[1].data["q"] == 'a "quoted" \\ text'
    assert history[3].at == T0 + timedelta(seconds=2)
    for name in ("stale", "lost"):
        record = store.load(name, "default")
        assert (
            record is not None
            and record.seq == 1
            and len(store.history(name, tenant="default")) == 1
        )
    due = store.due_timers(T0 + timedelta(hours=1), 10)
    assert sorted((t.timer_id, t.fire_at) for t in due) == [("kept", t2), ("new", t1)]
    released = store.load("released", "default")
    assert released is not None and released.lease_owner is None and not released.ready
    assert store.renew_leases("A", T0, 30).keys() == {("default", "lost")}


def test_two_steps_of_one_execution_in_a_batch_see_each_other(store: Store) -> None:
    create(store, "e1")
    create(store, "e2")
    outcomes = store.commit([step("e1", 1), step("e2", 1), step("e1", 2), step("e1", 2)])
    assert outcomes == [
        CommitOutcome.OK,
        CommitOutcome.OK,
        CommitOutcome.OK,
        CommitOutcome.CONFLICT,
    ]
    assert [e.seq for e in store.history("e1", tenant="default")] == [1, 2, 3]


# --- PostgreSQL only ----------------------------------------------------------------------


@pytest.mark.postgres
def test_a_set_based_batch_announces_what_became_claimable(postgres_url: str) -> None:
    from wovyr.store.postgres import PostgresStore

    store, other = PostgresStore(postgres_url, max_size=2), PostgresStore(postgres_url, max_size=2)
    try:
        for name in ("a", "b", "c"):
            create(store, name, owner="A")
        assert other.wait_for_work(0.01) is False  # listening from now on
        leased = {
            c.execution_id: c for c in store.claim(ClaimAsk("A", T0 + timedelta(minutes=1), 30, 5))
        }
        assert store.commit(
            [
                step("a", 1, fence=leased["a"].fence, release=True),  # ready, free: announce
                step("b", 1, fence=leased["b"].fence),  # still leased: nothing to announce
            ]
        ) == [CommitOutcome.OK, CommitOutcome.OK]
        assert other.wait_for_work(5) is True
    finally:
        store.close()
        other.close()


@pytest.mark.postgres
def test_workflow_and_status_filters_use_one_index(postgres_url: str) -> None:
    import psycopg

    from wovyr.store.postgres import PostgresStore
    from wovyr.store.postgres.queries import queries

    PostgresStore(postgres_url).close()
    params: dict[str, Any] = dict.fromkeys(
        (
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
    params |= {"tenant": "default", "workflow": "wf", "status": "failed", "limit": 51}
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("SET enable_seqscan = off")
        plan = conn.execute(
            "EXPLAIN " + queries()["list_executions"], params, prepare=False
        ).fetchall()
    text = "\n".join(row[0] for row in plan)
    assert "executions_by_workflow_status" in text and "Filter" not in text, text
