"""Contract: a step that starts gated attempts carries its flow gate (`StepWrite.gate`) and
the store takes it in the step's own transaction (`commit_gated`), on every store: granted,
the step is written and holds its slots and units; refused, nothing of the step is written
and the refusal comes back in its place; a step that does not apply takes nothing; the
slots a batch's steps release go with them (PostgreSQL's one-statement batch included)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from tests.contract.test_store_fair_claim import start

from wovyr.events import Event
from wovyr.store.base import ClaimAsk, CommitOutcome, StepWrite, Store
from wovyr.store.flow import FlowAcquire, FlowAnswer, RateRequest, SlotClaim

T0 = datetime(2030, 1, 1, tzinfo=UTC)
ONE = RateRequest("one", units=1, capacity=1, per_second=1.0)


def running(store: Store, *names: str) -> None:
    for name in names:
        start(store, "t", name, T0)
    assert len(store.claim(ClaimAsk("W", T0, 30, len(names)))) == len(names)


def step(
    store: Store,
    name: str,
    *,
    gate: FlowAcquire | None = None,
    released: tuple[tuple[str, str], ...] = (),
    stale: bool = False,
) -> StepWrite:
    record = store.load(name, "t")
    assert record is not None
    return StepWrite(
        execution_id=name,
        expected_seq=record.seq - 1 if stale else record.seq,
        events=[Event("ActivityStarted", T0, {"activity": "a"})],
        checkpoint={"step": name},
        status="running",
        updated_at=T0,
        fence=record.fence,
        ready=True,
        tenant="t",
        flow_released=released,
        gate=gate,
    )


def gate(name: str, rates: list[RateRequest], slots: list[SlotClaim]) -> FlowAcquire:
    return FlowAcquire("t", name, "W", T0, rates, slots)


def seq(store: Store, name: str) -> int:
    record = store.load(name, "t")
    assert record is not None
    return record.seq


def test_a_granted_gate_and_its_step_go_together_a_refused_one_writes_nothing(
    store: Store,
) -> None:
    running(store, "e1", "e2", "e3")
    before = seq(store, "e2")
    results = store.commit_gated(
        [
            step(store, "e1", gate=gate("e1", [ONE], [SlotClaim("k", "e1/a/1", 1)])),
            step(store, "e2", gate=gate("e2", [], [SlotClaim("k", "e2/a/1", 1)])),
            step(store, "e3"),  # a plain step of the same batch
        ]
    )
    assert results[0] is CommitOutcome.OK and results[2] is CommitOutcome.OK
    refused = results[1]
    assert isinstance(refused, FlowAnswer) and not refused.granted
    assert refused.reason == "concurrency k: 1 running (e1/a/1)"
    assert seq(store, "e1") == before + 1 and seq(store, "e3") == before + 1
    assert seq(store, "e2") == before  # nothing of the refused step
    assert store.history("e2", tenant="t")[-1].type == "ExecutionStarted"
    assert store.activity_slot_holders("t", "k", T0) == ["e1/a/1"]
    taken = store.acquire_flow(FlowAcquire("t", "e3", "W", T0, rates=[ONE]))
    assert not taken.granted  # e1's step took the bucket's one unit


def test_a_refused_gate_remembers_the_waiter_and_commit_says_held(store: Store) -> None:
    running(store, "e1", "e2", "e3")
    assert store.commit_gated([step(store, "e1", gate=gate("e1", [ONE], []))]) == [CommitOutcome.OK]
    [first] = store.commit_gated([step(store, "e2", gate=gate("e2", [ONE], []))])
    assert isinstance(first, FlowAnswer) and first.wait == pytest.approx(1.0)
    # the plain commit answers HELD for a refused gate (and writes nothing either)
    before = seq(store, "e3")
    assert store.commit([step(store, "e3", gate=gate("e3", [ONE], []))]) == [CommitOutcome.HELD]
    assert seq(store, "e3") == before
    later = store.acquire_flow(FlowAcquire("t", "e2", "W", T0, rates=[ONE]))
    assert later.wait == pytest.approx(3.0)  # the two refusals before it were told 1 s, 2 s


def test_a_step_that_does_not_apply_takes_nothing(store: Store) -> None:
    running(store, "e1", "e2")
    claim = SlotClaim("k", "e1/a/1", 1)
    [outcome] = store.commit_gated([step(store, "e1", gate=gate("e1", [ONE], [claim]), stale=True)])
    assert outcome is CommitOutcome.CONFLICT
    assert store.activity_slot_holders("t", "k", T0) == []
    results = store.commit_gated(
        [step(store, "e2", gate=gate("e2", [ONE], [SlotClaim("k", "e2/a/1", 1)]))]
    )
    assert results == [CommitOutcome.OK]  # the unit and the slot were there to take


def test_the_slots_a_batch_releases_go_with_its_steps(store: Store) -> None:
    running(store, "e1", "e2", "e3")
    slots = [SlotClaim("k", f"{n}/a/1", 3) for n in ("e1", "e2", "e3")]
    granted = store.acquire_flows([gate(s.holder[:2], [], [s]) for s in slots])
    assert all(a.granted for a in granted)
    # two steps of one plain batch (PostgreSQL: one set-based statement) release theirs
    outcomes = store.commit(
        [
            step(store, "e1", released=(("k", "e1/a/1"),)),
            step(store, "e2", released=(("k", "e2/a/1"),)),
            step(store, "e3", released=(("k", "e3/a/1"),), stale=True),  # not applied
        ]
    )
    assert outcomes == [CommitOutcome.OK, CommitOutcome.OK, CommitOutcome.CONFLICT]
    assert store.activity_slot_holders("t", "k", T0) == ["e3/a/1"]


def test_a_key_with_room_for_every_ask_is_not_read_holder_by_holder(store: Store) -> None:
    """Stale rows (a crashed worker's) count until a key could be full: then its holders'
    leases are looked at and the stale ones give their slots back."""
    running(store, "e1", "e2", "e3")
    crashed = FlowAcquire("t", "e1", "GONE", T0, [], [SlotClaim("k", "e1/a/1", 2)])
    assert store.acquire_flows([crashed]) == [FlowAnswer(granted=True)]  # never live
    two = gate("e2", [], [SlotClaim("k", "e2/a/1", 2)])
    assert store.commit_gated([step(store, "e2", gate=two)]) == [CommitOutcome.OK]
    assert store.activity_slot_holders("t", "k", T0) == ["e2/a/1"]
    three = gate("e3", [], [SlotClaim("k", "e3/a/1", 2)])
    assert store.commit_gated([step(store, "e3", gate=three)]) == [CommitOutcome.OK]
    assert store.activity_slot_holders("t", "k", T0) == ["e2/a/1", "e3/a/1"]
    again = store.acquire_flow(FlowAcquire("t", "e1", "W", T0, slots=[SlotClaim("k", "e1/a/2", 2)]))
    assert again.reason == "concurrency k: 2 running (e2/a/1, e3/a/1)"
