"""Bulk-action batches and `purge_executions` on every store: deduplicated creation with its
audit record, a fenced lease, items pending until their outcome, counts, completion, and a
purge that leaves nothing of a finished execution behind (and nothing else touched)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from tests.contract.test_store_contract import create, step

from wovyr.store.audit import AuditEntry
from wovyr.store.base import ExecutionFilter, NewExecution, Store
from wovyr.store.bulk import BatchItemFilter, BatchOutcome, BatchUpdate, NewBatch
from wovyr.store.postgres import PostgresStore
from wovyr.store.streams import NewChunk, StreamAppend

T0 = datetime(2030, 1, 1, tzinfo=UTC)


def new_batch(
    batch_id: str = "b1",
    *,
    tenant: str = "default",
    key: str | None = None,
    fingerprint: str = "f1",
    audit: bool = False,
) -> NewBatch:
    return NewBatch(
        tenant=tenant,
        id=batch_id,
        action="signal",
        filter={"status": "running", "until": "2030-01-01T00:00:00+00:00"},
        created_at=T0,
        created_by="local:me",
        fingerprint=fingerprint,
        signal="go",
        payload={"n": 1},
        idempotency_key=key,
        audit=AuditEntry(T0, tenant, "local:me", "batch.submit", batch_id) if audit else None,
    )


def update(fence: int, **kw: object) -> BatchUpdate:
    return BatchUpdate(
        tenant="default",
        batch_id="b1",
        fence=fence,
        now=T0 + timedelta(seconds=1),
        lease_until=T0 + timedelta(seconds=31),
        **kw,  # type: ignore[arg-type]
    )


def test_a_batch_is_created_once_per_key_or_running_fingerprint(store: Store) -> None:
    created, batch = store.create_batch(new_batch(key="k", audit=True))
    assert created and batch.status == "running" and batch.listed == 0 and batch.fence == 0
    assert batch.filter == {"status": "running", "until": "2030-01-01T00:00:00+00:00"}
    assert (batch.signal, batch.payload, batch.created_by) == ("go", {"n": 1}, "local:me")
    again, same = store.create_batch(new_batch("b2", key="k", fingerprint="other"))
    assert not again and same.id == "b1"
    twin, same = store.create_batch(new_batch("b3"))  # no key: the running fingerprint
    assert not twin and same.id == "b1"
    other, b4 = store.create_batch(new_batch("b4", tenant="t2"))  # tenants apart
    assert other and b4.tenant == "t2"
    assert [r.action for r in store.audit_records()] == ["batch.submit"]  # once
    assert store.get_batch("t2", "b1") is None
    assert [b.id for b in store.list_batches("default")] == ["b1"]


def test_batches_list_newest_first_in_pages(store: Store) -> None:
    for i, batch_id in enumerate(("a", "b", "c", "d")):
        batch = new_batch(batch_id, fingerprint=batch_id)
        at = T0 + timedelta(seconds=i // 2)  # two pairs created at the same time
        store.create_batch(replace(batch, created_at=at))
    store.create_batch(new_batch("z", tenant="t2"))
    first = store.list_batches("default", 3)
    assert [b.id for b in first] == ["d", "c", "b"]
    rest = store.list_batches("default", 3, before=(first[-1].created_at, first[-1].id))
    assert [b.id for b in rest] == ["a"]
    assert store.list_batches("default", 3, before=(T0, "a")) == []


def test_the_claim_is_a_lease_and_every_write_is_fenced(store: Store) -> None:
    store.create_batch(new_batch())
    mine = store.claim_batch("r1", T0, 30.0)
    assert mine is not None and mine.lease_owner == "r1" and mine.fence == 1
    assert store.claim_batch("r2", T0 + timedelta(seconds=10), 30.0) is None  # held
    again = store.claim_batch("r1", T0 + timedelta(seconds=10), 30.0)  # its own: renewed
    assert again is not None and again.fence == 2
    taken = store.claim_batch("r2", T0 + timedelta(seconds=60), 30.0)  # expired
    assert taken is not None and taken.lease_owner == "r2" and taken.fence == 3
    assert store.update_batch(update(2, listed=["e1"], cursor="c1")) is None  # r1 lost it
    batch = store.get_batch("default", "b1")
    assert batch is not None and batch.listed == 0 and batch.cursor is None


def test_items_are_pending_until_their_outcome_and_the_batch_completes(store: Store) -> None:
    store.create_batch(new_batch())
    claim = store.claim_batch("r1", T0, 30.0)
    assert claim is not None
    fence = claim.fence
    listed = store.update_batch(update(fence, listed=["e3", "e2", "e1"], cursor="c1"))
    assert listed is not None
    assert (listed.listed, listed.pending, listed.cursor, listed.pages) == (3, 3, "c1", 1)
    assert listed.lease_until == T0 + timedelta(seconds=31)
    pending = store.batch_items(BatchItemFilter("default", "b1", outcome="pending"))
    assert [(i.n, i.execution_id) for i in pending] == [(1, "e3"), (2, "e2"), (3, "e1")]
    outcomes = [
        BatchOutcome("e3", "ok"),
        BatchOutcome("e2", "skipped", "already completed"),
        BatchOutcome("e3", "error", "twice"),  # an item's outcome is recorded once
    ]
    half = store.update_batch(update(fence, outcomes=outcomes))
    assert half is not None and (half.ok, half.skipped, half.errors, half.pending) == (1, 1, 0, 1)
    assert half.cursor == "c1" and half.pages == 1
    last = store.update_batch(update(fence, listed_all=True, cursor=None))
    assert last is not None and last.status == "running" and last.listed_all  # e1 pending
    done = store.update_batch(update(fence, outcomes=[BatchOutcome("e1", "error", "boom")]))
    assert done is not None and done.status == "completed" and done.finished
    assert done.finished_at == T0 + timedelta(seconds=1) and done.lease_owner is None
    assert (done.ok, done.skipped, done.errors, done.listed) == (1, 1, 1, 3)
    every = BatchItemFilter("default", "b1")
    items = store.batch_items(every)
    assert [(i.execution_id, i.outcome, i.detail) for i in items] == [
        ("e3", "ok", ""),
        ("e2", "skipped", "already completed"),
        ("e1", "error", "boom"),
    ]
    assert items[0].at == T0 + timedelta(seconds=1)
    assert [i.n for i in store.batch_items(replace(every, after=1, limit=1))] == [2]
    assert store.claim_batch("r1", T0 + timedelta(hours=1), 30.0) is None  # finished
    assert store.update_batch(update(fence, listed=["e9"])) is None
    # its fingerprint is free again: the same filter may be submitted anew
    created, fresh = store.create_batch(new_batch("b5"))
    assert created and fresh.id == "b5"


def test_an_empty_listing_completes_the_batch(store: Store) -> None:
    store.create_batch(new_batch())
    claim = store.claim_batch("r1", T0, 30.0)
    assert claim is not None
    done = store.update_batch(update(claim.fence, listed_all=True))
    assert done is not None and done.status == "completed" and done.listed == 0


def _finish(store: Store, execution_id: str, tenant: str = "default") -> None:
    store.commit([step(execution_id, 1, status="completed", tenant=tenant)])


def test_purge_deletes_finished_executions_with_everything_kept_for_them(store: Store) -> None:
    store.create_execution(
        NewExecution(
            id="gone",
            tenant="default",
            workflow="wf",
            version="1",
            definition_hash="h",
            created_at=T0,
            input={},
            first_step=step("gone", 0, armed=(("t1", T0 + timedelta(days=1)),)),
            labels={"team": "a", "env": "prod"},
        )
    )
    record = store.load("gone", "default")
    assert record is not None
    assert store.append_stream(
        StreamAppend("default", "gone", record.fence, [NewChunk("a", 1, 1, "attempt")], T0)
    )
    _finish(store, "gone")
    create(store, "live")  # running: kept
    create(store, "gone", tenant="t2")  # the same id in another tenant: kept
    _finish(store, "gone", tenant="t2")
    create(store, "kept")
    _finish(store, "kept")

    assert store.purge_executions("default", ["gone", "live", "missing", "gone"]) == ["gone"]

    assert store.load("gone", "default") is None
    assert store.history("gone", tenant="default") == []
    assert store.read_stream("default", "gone") == []
    assert all(
        t.execution_id != "gone" or t.tenant != "default"
        for t in store.due_timers(T0 + timedelta(days=2), 100)
    )
    by_label = ExecutionFilter(tenant="default", labels=(("team", "a"),))
    assert store.list_executions(by_label).items == []
    assert store.load("live", "default") is not None
    assert store.load("kept", "default") is not None
    assert store.load("gone", "t2") is not None and store.history("gone", tenant="t2")
    assert store.purge_executions("default", []) == []


@pytest.mark.postgres
def test_postgres_batch_leases_follow_the_database_clock(postgres_url: str) -> None:
    """With db_clock, a batch lease is measured on the database's clock, like an
    execution's: a runner whose own clock runs an hour ahead cannot take a held lease."""
    store = PostgresStore(postgres_url, db_clock=True)
    try:
        store.create_batch(new_batch())
        mine = store.claim_batch("r1", T0, 30.0)  # the caller's time is not used
        assert mine is not None and mine.lease_until is not None
        assert mine.lease_until > datetime.now(UTC) + timedelta(seconds=20)
        ahead = datetime.now(UTC) + timedelta(hours=1)
        assert store.claim_batch("r2", ahead, 30.0) is None
        renewed = store.update_batch(
            BatchUpdate("default", "b1", mine.fence, T0, T0 + timedelta(seconds=30), listed=["e"])
        )
        assert renewed is not None and renewed.lease_until is not None
        assert renewed.lease_until > datetime.now(UTC) + timedelta(seconds=20)
    finally:
        store.close()


def test_of_runners_claiming_at_once_one_gets_the_batch(store: Store) -> None:
    store.create_batch(new_batch())
    with ThreadPoolExecutor(max_workers=8) as pool:
        claims = list(pool.map(lambda i: store.claim_batch(f"r{i}", T0, 30.0), range(8)))
    won = [c for c in claims if c is not None]
    assert len(won) == 1 and won[0].fence == 1
    batch = store.get_batch("default", "b1")
    assert batch is not None and batch.lease_owner == won[0].lease_owner and batch.fence == 1
