"""The continue-as-new hand-over on every store: a step that ends a run carries the chain's
next run (`StepWrite.continued_as`), created in the same transaction when the step applies
and never when it is refused; a taken id refuses the whole batch; a batch of many steps
keeps each step's hand-over to itself; fifty hand-overs in a row make fifty linked rows."""

from __future__ import annotations

import itertools
from dataclasses import replace
from datetime import UTC, date, datetime, timedelta

import pytest

from wovyr.errors import StoreError
from wovyr.events import Event
from wovyr.store.base import CommitOutcome, NewExecution, StepWrite, Store
from wovyr.store.records import Debit

T0 = datetime(2030, 1, 1, tzinfo=UTC)


def _step(execution_id: str, seq: int, status: str = "running", **more: object) -> StepWrite:
    event = Event("Thing", T0, {"seq": seq})
    return StepWrite(
        execution_id=execution_id,
        expected_seq=seq,
        events=[event],
        checkpoint={"seq": seq + 1},
        status=status,
        updated_at=T0,
        ready=status == "running",
        tenant="t1",
        **more,  # type: ignore[arg-type]
    )


def _new(execution_id: str, previous: str | None = None, *debits: Debit) -> NewExecution:
    started = Event("ExecutionStarted", T0, {"continued_from": previous})
    first = replace(
        _step(execution_id, 0),
        events=[started, Event("SignalReceived", T0, {"name": "s"})],
        checkpoint={"continued_from": previous},
    )
    return NewExecution(
        id=execution_id,
        tenant="t1",
        workflow="wf",
        version="1",
        definition_hash="h",
        created_at=T0 + timedelta(seconds=1),
        input={"n": 1},
        first_step=first,
        debits=debits,
    )


def _hand_over(old: str, seq: int, new: str, *debits: Debit) -> StepWrite:
    return _step(old, seq, "continued", continued_as=_new(new, old, *debits))


def test_the_next_run_is_created_with_the_step_that_ends_the_last(store: Store) -> None:
    store.create_execution(_new("c"))
    assert store.commit([_hand_over("c", 2, "c~c2")]) == [CommitOutcome.OK]
    old, new = store.load("c", "t1"), store.load("c~c2", "t1")
    assert old is not None and old.status == "continued" and not old.ready
    assert new is not None and new.status == "running" and new.ready and new.seq == 2
    assert new.checkpoint == {"continued_from": "c"}
    history = store.history("c~c2", tenant="t1")
    assert [e.type for e in history] == ["ExecutionStarted", "SignalReceived"]
    assert store.load("c~c2", "other") is None  # in the step's tenant only


def test_a_refused_step_creates_no_run(store: Store) -> None:
    store.create_execution(_new("c"))
    assert store.commit([_hand_over("c", 7, "c~c2")]) == [CommitOutcome.CONFLICT]
    assert store.commit([replace(_hand_over("c", 2, "c~c2"), fence=99)]) == [
        CommitOutcome.LEASE_LOST
    ]
    assert store.load("c~c2", "t1") is None
    record = store.load("c", "t1")
    assert record is not None and record.status == "running"


def test_a_taken_id_refuses_the_whole_batch(store: Store) -> None:
    store.create_execution(_new("c"))
    store.create_execution(_new("other"))
    store.create_execution(_new("c~c2"))  # taken (only an older store could hold one)
    with pytest.raises(StoreError):
        store.commit([_step("other", 2), _hand_over("c", 2, "c~c2")])
    for execution_id in ("c", "other"):
        record = store.load(execution_id, "t1")
        assert record is not None and record.seq == 2 and record.status == "running"


def test_a_batch_keeps_each_hand_over_to_its_own_step(store: Store) -> None:
    for execution_id in ("a", "b", "d"):
        store.create_execution(_new(execution_id))
    outcomes = store.commit(
        [_hand_over("a", 2, "a~c2"), _hand_over("b", 5, "b~c2"), _hand_over("d", 2, "d~c2")]
    )
    assert outcomes == [CommitOutcome.OK, CommitOutcome.CONFLICT, CommitOutcome.OK]
    assert store.load("a~c2", "t1") is not None and store.load("d~c2", "t1") is not None
    assert store.load("b~c2", "t1") is None


def test_the_next_run_debits_its_start_in_the_same_transaction(store: Store) -> None:
    store.create_execution(_new("c"))
    debit = Debit("executions", 1, date(2030, 1, 1))
    assert store.commit([_hand_over("c", 2, "c~c2", debit)]) == [CommitOutcome.OK]
    assert store.quota_usage("t1", date(2030, 1, 1)) == {"executions": 1.0}


def test_fifty_hand_overs_make_fifty_linked_runs(store: Store) -> None:
    store.create_execution(_new("r"))
    ids = ["r", *(f"r~c{n}" for n in range(2, 51))]
    for old, new in itertools.pairwise(ids):
        record = store.load(old, "t1")
        assert record is not None
        assert store.commit([_hand_over(old, record.seq, new)]) == [CommitOutcome.OK]
    rows = {r.id: r for r in store.list_executions(_every("t1")).items}
    assert sorted(rows) == sorted(ids)
    assert [rows[i].status for i in ids] == ["continued"] * 49 + ["running"]
    for old, new in itertools.pairwise(ids):
        history = store.history(new, tenant="t1")
        assert history[0].data == {"continued_from": old}
        ended = new != ids[-1]  # each run's own short history: its start (and end)
        assert len(history) == (3 if ended else 2)


def _every(tenant: str):  # type: ignore[no-untyped-def]
    from wovyr.store.base import ExecutionFilter

    return ExecutionFilter(tenant=tenant, limit=100)
