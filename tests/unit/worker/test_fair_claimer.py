"""The worker's fair claim (`wovyr.worker.fair`): the turns decided in memory (`plan_turns`)
and the claimer that keeps the tenants with claimable work, on a real (memory) store."""

from __future__ import annotations

import random
from collections import Counter
from datetime import UTC, datetime

from tests.contract.test_store_fair_claim import backlog, start

from wovyr.store.base import ClaimAsk
from wovyr.store.records import MAX_TURN_TENANTS
from wovyr.store.sqlite import SQLiteStore
from wovyr.worker.fair import FairClaimer, TenantShares, _level_turns, _scored_turns, plan_turns

T0 = datetime(2030, 1, 1, tzinfo=UTC)


def test_plan_serves_the_tenants_holding_the_fewest_then_goes_round_the_cursor() -> None:
    tenants = ["a", "b", "c", "d"]
    assert plan_turns(tenants, {}, 2) == {"a": 1, "b": 1}
    assert plan_turns(tenants, {}, 2, start=2) == {"c": 1, "d": 1}
    assert plan_turns(tenants, {}, 2, start=3) == {"d": 1, "a": 1}
    assert plan_turns(tenants, {"a": 2, "b": 1}, 3) == {"c": 1, "d": 1, "b": 1}
    assert plan_turns(tenants, {"a": 2, "b": 1}, 3, start=2) == {"c": 2, "d": 1}
    assert plan_turns(tenants, {}, 10) == {"a": 3, "b": 3, "c": 2, "d": 2}
    assert plan_turns([], {}, 5) == {} and plan_turns(tenants, {}, 0) == {}


def test_plan_follows_weights_and_caps() -> None:
    shares = TenantShares(None, weights={"a": 3.0}, ceiling=None)
    # slot k scores (held + k) / weight: A's 1/3, 2/3, 1, 4/3 ...; B's 1, 2 ...
    assert plan_turns(["a", "b"], {}, 8, shares) == {"a": 6, "b": 2}
    capped = TenantShares(None, ceiling=2)
    assert plan_turns(["a", "b"], {"a": 1}, 8, capped) == {"a": 1, "b": 2}
    assert plan_turns(["a"], {"a": 2}, 8, capped) == {}


def test_plan_names_at_most_so_many_tenants() -> None:
    tenants = [f"t{i:04}" for i in range(MAX_TURN_TENANTS * 2)]
    assert len(plan_turns(tenants, {}, 10_000)) == MAX_TURN_TENANTS
    weighted = TenantShares(None, weights={"t0000": 2.0})
    assert len(plan_turns(tenants, {}, 10_000, weighted)) == MAX_TURN_TENANTS


def test_the_level_plan_equals_the_slot_by_slot_plan() -> None:
    rng = random.Random(15)
    for _ in range(2000):
        tenants = [f"t{i:02}" for i in range(rng.randint(1, 30))]
        held = {t: rng.randint(0, 6) for t in tenants if rng.random() < 0.7}
        limit, at = rng.randint(1, 40), rng.randrange(len(tenants))
        cap = rng.choice([None, rng.randint(1, 8)])
        expected = _scored_turns(tenants, held, limit, TenantShares(None, ceiling=cap), at)
        assert _level_turns(tenants, held, limit, cap, at) == expected


def test_claims_go_round_the_tenants() -> None:
    store = SQLiteStore()
    for tenant in ("a", "b", "c"):
        backlog(store, tenant, 5)
    claimer = FairClaimer(store)
    order = [claimer.claim(ClaimAsk("W", T0, 30, 1), {})[0].tenant for _ in range(6)]
    assert order == ["a", "b", "c", "a", "b", "c"]
    assert claimer.looks == 1  # one look for tenants served all six claims


def test_a_tenant_out_of_work_leaves_and_an_empty_answer_looks_again() -> None:
    store = SQLiteStore()
    backlog(store, "a", 1)
    backlog(store, "b", 5)
    claimer = FairClaimer(store, refresh_claims=1000, refresh_seconds=1e9)
    assert Counter(c.tenant for c in claimer.claim(ClaimAsk("W", T0, 30, 4), {})) == {
        "a": 1,
        "b": 2,
    }
    assert claimer.tenants == ["b"]  # A gave fewer than its turns: it has no more work
    assert len(claimer.claim(ClaimAsk("W", T0, 30, 10), {})) == 3
    looks = claimer.looks
    backlog(store, "c", 2)  # work of a tenant the claimer does not know (another process)
    # B has nothing left: the empty answer looks again and finds C at once.
    assert Counter(c.tenant for c in claimer.claim(ClaimAsk("W", T0, 30, 10), {})) == {"c": 2}
    assert claimer.looks == looks + 1
    assert claimer.claim(ClaimAsk("W", T0, 30, 10), {}) == []  # nothing claimable anywhere


def test_a_tenant_with_work_started_elsewhere_gets_its_turn_within_refresh_claims() -> None:
    store = SQLiteStore()
    backlog(store, "a", 100)
    claimer = FairClaimer(store, refresh_claims=4, refresh_seconds=1e9)
    assert claimer.claim(ClaimAsk("W", T0, 30, 1), {})[0].tenant == "a"
    start(store, "b", "b-only")  # no hint: as if another process started it
    served = [claimer.claim(ClaimAsk("W", T0, 30, 1), {"a": 3})[0].tenant for _ in range(4)]
    assert "b" in served  # found at the next look, at most 4 claims later
    hinted = FairClaimer(store, refresh_claims=1000, refresh_seconds=1e9)
    assert hinted.claim(ClaimAsk("W", T0, 30, 1), {})[0].tenant == "a"
    start(store, "c", "c-only")
    hinted.hint("c")  # this process saw it arrive: its next claim serves it
    assert hinted.claim(ClaimAsk("W", T0, 30, 1), {"a": 1})[0].tenant == "c"
