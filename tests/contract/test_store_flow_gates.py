"""Contract: the activity gates of flow control (`acquire_flow`) on every store: token
buckets shared by every caller (refill, refusals that say when to look again, waiters told
one after the other), admin-declared buckets, all-or-nothing grants, activity slots that
count while their execution's lease holds, released by the step that records the result;
everything per tenant."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from tests.contract.test_store_fair_claim import start

from wovyr.store.base import ClaimAsk, StepWrite, Store
from wovyr.store.flow import FlowAcquire, NewRateLimit, RateRequest, SlotClaim

T0 = datetime(2030, 1, 1, tzinfo=UTC)
API = RateRequest("api", units=1, capacity=2, per_second=1.0)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def test_a_bucket_grants_its_capacity_then_tells_waiters_when_to_look(store: Store) -> None:
    assert store.acquire_flow(FlowAcquire("t", "e", "W", T0, rates=[API])).granted
    assert store.acquire_flow(FlowAcquire("t", "e", "W", T0, rates=[API])).granted
    first = store.acquire_flow(FlowAcquire("t", "e", "W", T0, rates=[API]))
    assert not first.granted and first.wait == pytest.approx(1.0)
    assert first.reason == "rate limit api: next slot in 1.0 s"
    second = store.acquire_flow(FlowAcquire("t", "e", "W", T0, rates=[API]))
    assert second.wait == pytest.approx(2.0)  # waiters look one after the other
    assert store.acquire_flow(FlowAcquire("t", "e", "W", at(1.0), rates=[API])).granted
    assert not store.acquire_flow(FlowAcquire("t", "e", "W", at(1.5), rates=[API])).granted
    assert store.acquire_flow(FlowAcquire("t", "e", "W", at(2.0), rates=[API])).granted
    # another tenant's bucket of the same name is its own
    assert store.acquire_flow(FlowAcquire("u", "e", "W", at(2.0), rates=[API])).granted
    [bucket] = store.rate_limits("t")
    assert (bucket.key, bucket.capacity, bucket.per_second, bucket.declared) == (
        "api",
        2,
        1.0,
        False,
    )
    # as of its last use (at 2.0, when it gave its last unit): refilled since at its rate
    assert bucket.refilled_at == pytest.approx(at(2.0).timestamp())
    assert bucket.tokens_at(at(2.5)) == pytest.approx(bucket.tokens + 0.5)
    assert bucket.tokens_at(at(60.0)) == 2  # never above its capacity


def test_weighted_units_and_a_request_above_the_capacity(store: Store) -> None:
    tokens = RateRequest("tok", units=150, capacity=200, per_second=100.0)
    assert store.acquire_flow(FlowAcquire("t", "e", "W", T0, rates=[tokens])).granted
    refused = store.acquire_flow(FlowAcquire("t", "e", "W", T0, rates=[tokens]))
    assert not refused.granted and refused.wait == pytest.approx(1.0)  # 100 short at 100/s
    huge = RateRequest("tok", units=500, capacity=200, per_second=100.0)
    answer = store.acquire_flow(FlowAcquire("t", "e", "W", at(10), rates=[huge]))
    assert not answer.granted and "more units than the bucket holds" in answer.reason


def test_all_or_nothing(store: Store) -> None:
    empty = RateRequest("empty", units=1, capacity=1, per_second=0.1)
    full = RateRequest("full", units=1, capacity=1, per_second=0.1)
    assert store.acquire_flow(FlowAcquire("t", "e", "W", T0, rates=[empty])).granted
    assert not store.acquire_flow(FlowAcquire("t", "e", "W", T0, rates=[empty, full])).granted
    # Nothing was taken:
    assert store.acquire_flow(FlowAcquire("t", "e", "W", T0, rates=[full])).granted


def test_declared_buckets_win_and_are_named_by_key(store: Store) -> None:
    missing = store.acquire_flow(FlowAcquire("t", "e", "W", T0, rates=[RateRequest("openai")]))
    assert not missing.granted and missing.reason == "rate limit openai: no such bucket"
    record = store.set_rate_limit(NewRateLimit("t", "openai", 1, 0.5, "admin", T0))
    assert record.declared and record.capacity == 1 and record.updated_by == "admin"
    assert store.acquire_flow(FlowAcquire("t", "e", "W", T0, rates=[RateRequest("openai")])).granted
    # an activity's own numbers do not reshape a declared bucket
    own = RateRequest("openai", units=1, capacity=100, per_second=100.0)
    refused = store.acquire_flow(FlowAcquire("t", "e", "W", T0, rates=[own]))
    assert not refused.granted and refused.wait == pytest.approx(2.0)
    assert store.rate_limits("u") == []
    assert store.delete_rate_limit("t", "openai") and not store.delete_rate_limit("t", "openai")


def test_activity_slots_count_while_the_lease_holds_and_go_with_the_result(store: Store) -> None:
    for name in ("e1", "e2"):
        start(store, "t", name, T0)
    assert {c.execution_id for c in store.claim(ClaimAsk("W", T0, 10, 2))} == {"e1", "e2"}
    one = SlotClaim("k", "e1/a/1", 1)
    two = SlotClaim("k", "e2/a/1", 1)
    assert store.acquire_flow(FlowAcquire("t", "e1", "W", T0, slots=[one])).granted
    # The holder again:
    assert store.acquire_flow(FlowAcquire("t", "e1", "W", T0, slots=[one])).granted
    refused = store.acquire_flow(FlowAcquire("t", "e2", "W", T0, slots=[two]))
    assert not refused.granted and refused.reason == "concurrency k: 1 running (e1/a/1)"
    assert store.activity_slot_holders("t", "k", T0) == ["e1/a/1"]
    assert store.acquire_flow(FlowAcquire("u", "x", "W", T0, slots=[one])).granted  # per tenant
    # The step recording e1's result releases the slot in its transaction.
    record = store.load("e1", "t")
    assert record is not None
    step = StepWrite(
        execution_id="e1",
        expected_seq=record.seq,
        events=[],
        checkpoint={},
        status="running",
        updated_at=T0,
        fence=record.fence,
        tenant="t",
        flow_released=[("k", "e1/a/1")],
    )
    store.commit([step])
    assert store.activity_slot_holders("t", "k", T0) == []
    assert store.acquire_flow(FlowAcquire("t", "e2", "W", T0, slots=[two])).granted
    # A crashed worker's slot: it counts until its lease expires, then it is free (and the
    # worker that takes the execution over asks again).
    three = SlotClaim("k", "e1/a/2", 1)
    assert not store.acquire_flow(FlowAcquire("t", "e1", "W", at(5), slots=[three])).granted
    assert store.activity_slot_holders("t", "k", at(5)) == ["e2/a/1"]
    assert store.activity_slot_holders("t", "k", at(11)) == []
    assert [c.execution_id for c in store.claim(ClaimAsk("W2", at(11), 10, 2))] == ["e2"]
    again = SlotClaim("k", "e2/a/2", 1)
    assert store.acquire_flow(FlowAcquire("t", "e2", "W2", at(11), slots=[again])).granted
    assert store.activity_slot_holders("t", "k", at(11)) == ["e2/a/2"]


def test_many_asks_in_one_transaction_are_answered_in_order(store: Store) -> None:
    for name in ("e1", "e2"):
        start(store, "t", name, T0)
    store.claim(ClaimAsk("W", T0, 10, 2))
    one = RateRequest("one", units=1, capacity=1, per_second=1.0)
    asks = [
        FlowAcquire("t", "e1", "W", T0, [one], [SlotClaim("k", "e1/a/1", 1)]),
        FlowAcquire("t", "e2", "W", T0, [one], []),  # the unit went to the first ask
        FlowAcquire("t", "e2", "W", T0, [], [SlotClaim("k", "e2/a/1", 1)]),  # so did the slot
        FlowAcquire("u", "x", "W", T0, [one], []),  # another tenant's bucket
    ]
    answers = store.acquire_flows(asks)
    assert [a.granted for a in answers] == [True, False, False, True]
    assert answers[1].reason == "rate limit one: next slot in 1.0 s"
    assert answers[2].reason == "concurrency k: 1 running (e1/a/1)"
    assert store.acquire_flows([]) == []


def test_an_ask_for_several_attempts_weighs_each_and_says_how_many_fit(store: Store) -> None:
    for name in ("e1", "e2"):
        start(store, "t", name, T0)
    store.claim(ClaimAsk("W", T0, 10, 2))
    # Three attempts of one unit each on a bucket of 2: the first two fit, the third
    # waits for its own unit (not for three at once, which the bucket never holds).
    three = FlowAcquire("t", "e1", "W", T0, [API, API, API], [], [(1, 0), (1, 0), (1, 0)])
    [refused] = store.acquire_flows([three])
    assert (refused.granted, refused.fits) == (False, 2)
    assert refused.wait == pytest.approx(1.0)
    assert refused.reason == "rate limit api: next slot in 1.0 s"
    two = FlowAcquire("t", "e1", "W", T0, [API, API], [], [(1, 0), (1, 0)])
    assert store.acquire_flows([two])[0].granted  # nothing was taken by the refusal
    # Slots likewise: each attempt counts the slots of those before it.
    claims = [SlotClaim("k", f"e2/a[{i}]/1", 2) for i in range(3)]
    ask = FlowAcquire("t", "e2", "W", T0, [], claims, [(0, 1)] * 3)
    [refused] = store.acquire_flows([ask])
    assert (refused.granted, refused.fits) == (False, 2)
    assert refused.reason == "concurrency k: 2 running (e2/a[0]/1, e2/a[1]/1)"
    assert store.activity_slot_holders("t", "k", T0) == []
    # asked again alone, the two that fit keep their turn before the third
    first = FlowAcquire("t", "e2", "W", T0, [], claims[:2], [(0, 1)] * 2)
    assert store.acquire_flows([first])[0].granted
    assert sorted(store.activity_slot_holders("t", "k", T0)) == ["e2/a[0]/1", "e2/a[1]/1"]
    other = FlowAcquire("t", "e1", "W", T0, [], [SlotClaim("k", "e1/b/1", 2)])
    assert not store.acquire_flows([other])[0].granted
