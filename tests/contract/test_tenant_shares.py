"""Fair-share weights and slot caps stored per tenant (its quotas' `weight`, `max_slots`), on
every store: what the host sets is what workers read (`TenantShares`, cached for a moment,
the worker's own settings as default and ceiling), and a stored weight shapes the claim."""

from __future__ import annotations

from collections import Counter, deque
from datetime import UTC, datetime

import pytest
from tests.contract.test_store_fair_claim import T0, backlog

from wovyr.engine.quotas import Quotas, quotas_of, set_quotas
from wovyr.errors import InputError
from wovyr.store.base import ClaimAsk, Store
from wovyr.worker.fair import FairClaimer, TenantShares

AT = datetime(2030, 1, 1, tzinfo=UTC)


class Ticks:
    """A monotonic clock the test moves."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_stored_weights_and_caps_are_read_with_the_workers_default_and_ceiling(
    store: Store,
) -> None:
    set_quotas(store, "a", Quotas(weight=3.0), by="cli", at=AT)
    set_quotas(store, "b", Quotas(max_slots=2, executions_per_day=10), by="cli", at=AT)
    assert quotas_of(store, "a").weight == 3.0
    assert quotas_of(store, "b") == Quotas(executions_per_day=10, max_slots=2)
    shares = TenantShares(store, weights={"a": 9.0, "c": 2.0}, ceiling=5)
    shares.refresh()
    assert [shares.weight(t) for t in ("a", "b", "c", "d")] == [3.0, 1.0, 2.0, 1.0]
    assert [shares.cap(t) for t in ("a", "b", "d")] == [5, 2, 5]  # the ceiling bounds all
    low = TenantShares(store, ceiling=1)
    low.refresh()
    assert low.cap("b") == 1 and not low.uniform
    free = TenantShares(store)
    free.refresh()
    assert free.cap("a") is None and free.cap("b") == 2


def test_a_change_is_read_once_the_cache_is_old(store: Store) -> None:
    ticks = Ticks()
    shares = TenantShares(store, ttl=2.0, monotonic=ticks)
    shares.refresh()
    assert shares.uniform
    set_quotas(store, "a", Quotas(weight=0.5), by="cli", at=AT)
    ticks.now = 1.9
    shares.refresh()
    assert shares.weight("a") == 1.0  # within the cache's 2 s
    ticks.now = 2.0
    shares.refresh()
    assert shares.weight("a") == 0.5


def test_bad_fair_share_settings_are_refused_clearly() -> None:
    from wovyr.engine.quotas import parse_quotas

    for bad, message in (
        ({"weight": 0}, "weight must be a number, more than 0 and at most 1000"),
        ({"weight": 1001}, "at most 1000"),
        ({"max_slots": 0}, "max_slots must be a whole number, 1 or more"),
        ({"max_slots": 1.5}, "whole number"),
    ):
        with pytest.raises(InputError, match=message):
            parse_quotas(bad)
    # over the API a weight counts as raised above the default 1 when none is stored
    assert Quotas().raises(Quotas(weight=2.0)) == ["weight"]
    assert Quotas().raises(Quotas(weight=0.5, max_slots=3)) == []
    assert Quotas(weight=0.5).raises(Quotas()) == ["weight"]  # back to 1 is a raise


def test_a_stored_weight_of_3_gets_about_3_claims_to_1(store: Store) -> None:
    """A worker of 8 slots, each claim filling the slot freed by its oldest execution:
    over 200 claims, tenant A (weight 3) gets 3/4 of them within 0.05 (150 +- 10)."""
    set_quotas(store, "a", Quotas(weight=3.0), by="cli", at=AT)
    backlog(store, "a", 250)
    backlog(store, "b", 250)
    claimer = FairClaimer(store, TenantShares(store))
    slots: deque[str] = deque(c.tenant for c in claimer.claim(ClaimAsk("W", T0, 3600, 8), {}))
    assert Counter(slots) == {"a": 6, "b": 2}
    served: Counter[str] = Counter()
    for _ in range(200):
        slots.popleft()  # the oldest execution ends: its slot frees
        [claim] = claimer.claim(ClaimAsk("W", T0, 3600, 1), Counter(slots))
        slots.append(claim.tenant)
        served[claim.tenant] += 1
    assert 140 <= served["a"] <= 160, served
    assert served["a"] + served["b"] == 200


def test_a_stored_slot_cap_bounds_what_the_tenant_holds(store: Store) -> None:
    set_quotas(store, "a", Quotas(max_slots=2), by="cli", at=AT)
    backlog(store, "a", 20)
    claimer = FairClaimer(store, TenantShares(store, ceiling=4))
    assert Counter(c.tenant for c in claimer.claim(ClaimAsk("W", T0, 3600, 8), {})) == {"a": 2}
    assert claimer.claim(ClaimAsk("W", T0, 3600, 8), {"a": 2}) == []
    backlog(store, "b", 20)
    assert Counter(c.tenant for c in claimer.claim(ClaimAsk("W", T0, 3600, 8), {"a": 2})) == {
        "b": 4
    }


def test_a_stored_max_running_holds_across_workers(store: Store) -> None:
    """`max_running` is read with the other settings, bounds the tenant's cap in each
    worker's plan, and is enforced by the claim against every worker's leases: two
    workers' claimers, 8 slots each, never lease more than 3 of A's executions together,
    while B takes the rest."""
    set_quotas(store, "a", Quotas(max_running=3), by="cli", at=AT)
    assert quotas_of(store, "a") == Quotas(max_running=3)
    backlog(store, "a", 20)
    backlog(store, "b", 20)
    one, two = TenantShares(store), TenantShares(store)
    first, second = FairClaimer(store, one), FairClaimer(store, two)
    got = Counter(c.tenant for c in first.claim(ClaimAsk("W1", T0, 3600, 8), {}))
    assert got == {"a": 3, "b": 5} and one.cap("a") == 3 and one.max_running(["a", "b"]) == {"a": 3}
    # The second worker plans A 3 of its 8 (it holds none), but A's 3 are leased by the
    # first: the claim gives B's 5; A, short, leaves its list, and its next claim (the
    # worker claims again at once after a claim that got work) fills the rest with B.
    got = Counter(c.tenant for c in second.claim(ClaimAsk("W2", T0, 3600, 8), {}))
    assert got == {"b": 5}
    assert second.tenants == ["b"]
    assert Counter(c.tenant for c in second.claim(ClaimAsk("W2", T0, 3600, 3), {"b": 5})) == {
        "b": 3
    }
    store.release_owner("W1")  # the first worker's executions suspend or end
    got = Counter(c.tenant for c in first.claim(ClaimAsk("W1", T0, 3600, 8), {}))
    assert got["a"] == 3


def test_bad_max_running_is_refused_and_a_raise_is_the_hosts() -> None:
    from wovyr.engine.quotas import parse_quotas

    with pytest.raises(InputError, match="max_running must be a whole number, 1 or more"):
        parse_quotas({"max_running": 0})
    assert Quotas(max_running=2).raises(Quotas(max_running=3)) == ["max_running"]
    assert Quotas(max_running=2).raises(Quotas()) == ["max_running"]
    assert Quotas().raises(Quotas(max_running=2)) == []
