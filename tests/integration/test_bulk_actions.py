"""Bulk actions on every store: batches that cancel, signal, rerun and delete the executions
a frozen filter selects, in pages, with per-item outcomes; a runner that stops (between
pages, or mid-page) is replaced once its lease expires and nothing is done twice;
re-submitting changes nothing; tenants never see each other's executions or batches."""

from __future__ import annotations

from datetime import timedelta

import pytest

from wovyr.clock import ManualClock
from wovyr.engine.bulk import BatchRunner, Bulk, BulkFilter, encode_cursor
from wovyr.engine.engine import Engine
from wovyr.errors import Conflict, InputError, NotFound
from wovyr.store.bulk import BatchUpdate

FLOW = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: %s}
labels: {team: "ops"}
activities:
  - {id: wait, wait: {signal: go}}
"""


def start(engine: Engine, n: int, prefix: str = "run", name: str = "orders") -> list[str]:
    ids = [f"{prefix}-{i:04d}" for i in range(n)]
    for execution_id in ids:
        engine.start(FLOW % name, execution_id=execution_id)
    return ids


def outcomes(bulk: Bulk, batch_id: str) -> dict[str, tuple[str, str]]:
    items = bulk.items(batch_id, limit=1000)
    return {i.execution_id: (i.outcome, i.detail) for i in items}


def test_bulk_cancel_by_filter_in_pages_with_outcomes(engine: Engine, clock: ManualClock) -> None:
    start(engine, 7, name="orders")
    start(engine, 2, prefix="other", name="billing")
    engine.cancel("run-0001")
    bulk = Bulk(engine.acting("local:ops"))
    created, batch = bulk.submit("cancel", BulkFilter(workflow="orders"))
    assert created and batch.status == "running" and batch.action == "cancel"
    frozen = clock.now() + timedelta(microseconds=1)
    assert batch.filter["until"] == frozen.isoformat()  # frozen at submit
    clock.advance(1)
    start(engine, 1, prefix="late", name="orders")  # after the submit: not swept in
    runner = BatchRunner(engine, "r1", page_size=3)
    assert runner.run() == 3  # pages of 3, 3 and 1 (the last one ends the listing)
    done = bulk.get(batch.id)
    assert done.status == "completed" and done.pages == 3
    assert (done.listed, done.ok, done.skipped, done.errors) == (7, 6, 1, 0)
    got = outcomes(bulk, batch.id)
    assert got["run-0001"] == ("skipped", "already cancelled")
    assert got["run-0000"] == ("ok", "cancelled")
    assert engine.get("run-0003").status == "cancelled"
    assert engine.get("late-0000").status == "running"
    assert engine.get("other-0000").status == "running"
    submit = [r for r in engine.store.audit_records() if r.action == "batch.submit"]
    assert len(submit) == 1 and submit[0].actor == "local:ops" and submit[0].target == batch.id
    assert submit[0].details["filter"]["workflow"] == "orders"


def test_resubmitting_returns_the_batch_and_changes_nothing(engine: Engine) -> None:
    start(engine, 3)
    bulk = Bulk(engine.acting("local:ops"))
    _, batch = bulk.submit("cancel", BulkFilter(status="running"), idempotency_key="k1")
    again, same = bulk.submit("cancel", BulkFilter(status="running"))  # running: its twin
    assert not again and same.id == batch.id
    BatchRunner(engine, "r1").run()
    finished = bulk.get(batch.id)
    audits = len(engine.store.audit_records())
    start(engine, 2, prefix="new")
    created, same = bulk.submit("cancel", BulkFilter(status="running"), idempotency_key="k1")
    assert not created and same == finished
    assert BatchRunner(engine, "r2").run() == 0  # nothing to do
    assert engine.get("new-0000").status == "running"
    assert len(engine.store.audit_records()) == audits
    with pytest.raises(Conflict, match="idempotency key 'k1'"):
        bulk.submit("cancel", BulkFilter(status="waiting"), idempotency_key="k1")


def test_bulk_signal_reaches_every_running_match(engine: Engine) -> None:
    start(engine, 4)
    engine.cancel("run-0002")
    bulk = Bulk(engine)
    _, batch = bulk.submit(
        "signal", BulkFilter(labels={"team": "ops"}), signal="go", payload={"n": 1}
    )
    BatchRunner(engine, "r1", page_size=2).run()
    done = bulk.get(batch.id)
    assert (done.ok, done.skipped, done.errors) == (3, 1, 0)
    assert outcomes(bulk, batch.id)["run-0002"] == ("skipped", "already cancelled")
    assert engine.query("run-0000").buffered_signals == {"go": 1}
    assert engine.query("run-0003").buffered_signals == {"go": 1}


def test_bulk_rerun_starts_one_rerun_per_finished_match(engine: Engine) -> None:
    start(engine, 3)
    engine.cancel("run-0000")
    engine.cancel("run-0001")
    bulk = Bulk(engine)
    _, batch = bulk.submit("rerun", BulkFilter(id_prefix="run-"))
    BatchRunner(engine, "r1").run()
    got = outcomes(bulk, batch.id)
    assert got["run-0002"] == ("skipped", "running: not rerun")
    new_id = got["run-0000"][1]
    assert got["run-0000"][0] == "ok" and new_id.startswith("run-0000~r")
    assert engine.query(new_id).rerun_of == {"id": "run-0000", "from": None}
    assert engine.reruns("run-0001") == [got["run-0001"][1]]
    assert bulk.get(batch.id).ok == 2


def test_bulk_delete_purges_finished_matches_only(engine: Engine) -> None:
    start(engine, 3)
    engine.cancel("run-0000")
    engine.cancel("run-0001")
    bulk = Bulk(engine)
    _, batch = bulk.submit("delete", BulkFilter(workflow="orders"))
    BatchRunner(engine, "r1").run()
    got = outcomes(bulk, batch.id)
    assert got == {
        "run-0000": ("ok", "deleted"),
        "run-0001": ("ok", "deleted"),
        "run-0002": ("skipped", "running: not finished"),
    }
    with pytest.raises(NotFound):
        engine.get("run-0000")
    assert engine.store.history("run-0001", tenant="default") == []
    assert [r.id for r in engine.list().items] == ["run-0002"]


def test_a_stopped_runner_is_replaced_after_its_lease(engine: Engine, clock: ManualClock) -> None:
    start(engine, 10)
    bulk = Bulk(engine)
    _, batch = bulk.submit("cancel", BulkFilter(status="running"))
    first = BatchRunner(engine, "r1", page_size=3, lease_seconds=30)
    first.step()
    first.step()  # two pages done; then it stops (its process died)
    half = bulk.get(batch.id)
    assert (half.listed, half.ok, half.status) == (6, 6, "running")
    second = BatchRunner(engine, "r2", page_size=3, lease_seconds=30)
    assert second.step() is None  # the first one's lease still holds
    clock.advance(31)
    second.run()
    done = bulk.get(batch.id)
    assert (done.status, done.listed, done.ok, done.skipped) == ("completed", 10, 10, 0)
    assert [i.n for i in bulk.items(batch.id)] == list(range(1, 11))
    assert all(engine.get(f"run-{i:04d}").status == "cancelled" for i in range(10))


def test_a_page_listed_by_a_runner_that_died_mid_page_is_finished_once(
    engine: Engine, clock: ManualClock
) -> None:
    """The state a runner leaves when it dies after listing a page and cancelling one of
    its executions: the next runner finishes the page, counting that one once, as ok."""
    start(engine, 5)
    bulk = Bulk(engine)
    _, batch = bulk.submit("cancel", BulkFilter(status="running"))
    query = BulkFilter.from_json(batch.filter).query("default", 3, None)
    page = engine.store.list_executions(query)
    assert [r.id for r in page.items] == ["run-0004", "run-0003", "run-0002"]
    dead = engine.store.claim_batch("dead", clock.now(), 30.0)
    assert dead is not None
    listed = engine.store.update_batch(
        BatchUpdate(
            tenant="default",
            batch_id=batch.id,
            fence=dead.fence,
            now=clock.now(),
            lease_until=clock.now() + timedelta(seconds=30),
            listed=[r.id for r in page.items],
            cursor=encode_cursor(page.next_cursor),
        )
    )
    assert listed is not None and listed.pending == 3
    engine.cancel("run-0004", reason=f"batch {batch.id}")  # done before it died
    clock.advance(31)
    BatchRunner(engine, "r2").run()
    done = bulk.get(batch.id)
    assert (done.status, done.listed, done.ok, done.skipped, done.errors) == (
        "completed",
        5,
        5,
        0,
        0,
    )
    assert outcomes(bulk, batch.id)["run-0004"] == ("ok", "cancelled")


def test_tenants_never_see_each_others_executions_or_batches(engine: Engine) -> None:
    other = engine.for_tenant("t2")
    start(engine, 2)
    start(other, 2)
    _, batch = Bulk(engine).submit("cancel", BulkFilter(status="running"))
    BatchRunner(engine, "r1").run()
    assert Bulk(engine).get(batch.id).ok == 2
    assert other.get("run-0000").status == "running"
    with pytest.raises(NotFound):
        Bulk(other).get(batch.id)
    with pytest.raises(NotFound):
        Bulk(other).items(batch.id)
    assert Bulk(other).batches() == []


def test_submissions_are_checked(engine: Engine) -> None:
    bulk = Bulk(engine)
    with pytest.raises(InputError, match="at least one criterion"):
        bulk.submit("cancel", BulkFilter())
    with pytest.raises(InputError, match="signal's name"):
        bulk.submit("signal", BulkFilter(status="running"))
    with pytest.raises(InputError, match="action is one of"):
        bulk.submit("explode", BulkFilter(status="running"))
    with pytest.raises(InputError, match="status is one of"):
        bulk.submit("cancel", BulkFilter(status="sleepy"))
    with pytest.raises(InputError, match="label key"):
        bulk.submit("cancel", BulkFilter(labels={"bad key": "v"}))
    assert bulk.batches() == []
