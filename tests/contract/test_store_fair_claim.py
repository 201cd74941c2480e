"""Contract: the fair claim (`ClaimAsk(..., fair=FairShare(...))`) on every store. One tenant's
backlog does not push another tenant's ready execution out of a claim; a freed slot goes to
the tenant holding the fewest; weights and caps shape the share; partitions still apply.
The claim by turns (`FairShare.turns`, decided by a worker's `FairClaimer`) and the look
for tenants with claimable work (`claimable_tenants`) that it relies on."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest

from wovyr.events import Event
from wovyr.store.base import ClaimAsk, FairShare, NewExecution, StepWrite, Store
from wovyr.store.records import MAX_TURN_TENANTS
from wovyr.store.shards import stable_shard

T0 = datetime(2030, 1, 1, tzinfo=UTC)


def start(store: Store, tenant: str, execution_id: str, at: datetime = T0) -> None:
    first = StepWrite(
        execution_id=execution_id,
        expected_seq=0,
        events=[Event("ExecutionStarted", at, {})],
        checkpoint={},
        status="running",
        updated_at=at,
        ready=True,
        tenant=tenant,
    )
    created, _ = store.create_execution(
        NewExecution(
            id=execution_id,
            tenant=tenant,
            workflow="wf",
            version="1",
            definition_hash="h",
            created_at=at,
            input=None,
            first_step=first,
        )
    )
    assert created


def backlog(store: Store, tenant: str, n: int) -> None:
    for i in range(n):
        start(store, tenant, f"{tenant}-{i:03}")


def tenants(claims: list[object]) -> Counter[str]:
    return Counter(c.tenant for c in claims)  # type: ignore[attr-defined]


def test_a_backlog_does_not_push_another_tenant_out_of_the_claim(store: Store) -> None:
    backlog(store, "a", 40)
    start(store, "b", "b-only")
    # The plain claim takes the oldest first: all of A's backlog is ahead of B.
    plain = store.claim(ClaimAsk("W", T0, 30, 4))
    assert tenants(plain) == {"a": 4}
    # The fair claim gives each tenant with claimable work its turn: limit / tenants each
    # (B has one; the next claim takes more of A's).
    got = store.claim(ClaimAsk("W", T0, 30, 4, fair=FairShare()))
    assert tenants(got) == {"a": 2, "b": 1}
    assert ("b", "b-only") in {c.key for c in got}
    assert tenants(
        store.claim(ClaimAsk("W", T0, 30, 4, fair=FairShare(held={"a": 2, "b": 1})))
    ) == {"a": 4}


def test_one_free_slot_goes_to_the_tenant_holding_the_fewest(store: Store) -> None:
    backlog(store, "a", 20)
    start(store, "b", "b-only")
    [claim] = store.claim(ClaimAsk("W", T0, 30, 1, fair=FairShare(held={"a": 3})))
    assert claim.key == ("b", "b-only")
    # With B's execution taken, A's backlog is claimed as before.
    assert tenants(
        store.claim(ClaimAsk("W", T0, 30, 5, fair=FairShare(held={"a": 3, "b": 1})))
    ) == {"a": 5}


def test_rounds_rotate_between_tenants_and_follow_weights(store: Store) -> None:
    for tenant in ("a", "b", "c"):
        backlog(store, tenant, 10)
    assert tenants(store.claim(ClaimAsk("W", T0, 30, 6, fair=FairShare()))) == {
        "a": 2,
        "b": 2,
        "c": 2,
    }
    weights = FairShare(held={"a": 2, "b": 2, "c": 2}, weights={"a": 2.0})
    # Shares up to the level S = (6 + 6) / (2 + 1 + 1) = 3: A's ranks score (2 + k) / 2 ->
    # 1.5, 2, 2.5, 3; B's and C's (2 + k) -> 3: four of A's, one each of B's and C's.
    assert tenants(store.claim(ClaimAsk("W", T0, 30, 6, fair=weights))) == {"a": 4, "b": 1, "c": 1}


def test_a_cap_bounds_what_one_tenant_holds(store: Store) -> None:
    backlog(store, "a", 10)
    capped = FairShare(held={"a": 2}, cap=3)
    assert tenants(store.claim(ClaimAsk("W", T0, 30, 8, fair=capped))) == {"a": 1}
    assert store.claim(ClaimAsk("W", T0, 30, 8, fair=FairShare(held={"a": 3}, cap=3))) == []
    start(store, "b", "b-only")
    assert tenants(store.claim(ClaimAsk("W", T0, 30, 8, fair=FairShare(held={"a": 3}, cap=3)))) == {
        "b": 1
    }


def test_the_fair_claim_keeps_partitions_leases_and_fences(store: Store) -> None:
    backlog(store, "a", 30)
    backlog(store, "b", 30)
    got = store.claim(ClaimAsk("W", T0, 30, 100, partitions=[1], of=2, fair=FairShare()))
    assert got and all(stable_shard(c.execution_id) % 2 == 1 for c in got)
    assert all(c.fence == 1 for c in got)
    # Leased rows are not claimable again until the lease expires.
    rest = store.claim(ClaimAsk("V", T0, 30, 100, fair=FairShare()))
    assert {c.key for c in rest}.isdisjoint({c.key for c in got})
    assert len(got) + len(rest) == 60
    again = store.claim(ClaimAsk("X", T0 + timedelta(seconds=31), 30, 100, fair=FairShare()))
    assert len(again) == 60 and all(c.fence == 2 for c in again)


# --- the claim by turns and the look for tenants (what a worker's FairClaimer uses) --------


def test_claimable_tenants_names_each_tenant_with_claimable_work_once(store: Store) -> None:
    assert store.claimable_tenants(T0) == []
    backlog(store, "b", 30)
    backlog(store, "a", 2)
    start(store, "c", "c-only")
    assert store.claimable_tenants(T0) == ["a", "b", "c"]
    # C's one execution leased: C has no claimable work until the lease expires.
    assert [
        c.key for c in store.claim(ClaimAsk("W", T0, 30, 1, fair=FairShare(turns={"c": 1})))
    ] == [("c", "c-only")]
    assert store.claimable_tenants(T0) == ["a", "b"]
    assert store.claimable_tenants(T0 + timedelta(seconds=31)) == ["a", "b", "c"]
    # Partitions: only tenants with claimable work in them.
    ours = {stable_shard(f"a-{i:03}") % 4 for i in range(2)}
    other = next(p for p in range(4) if p not in ours)
    assert "a" not in store.claimable_tenants(T0, partitions=[other], of=4)
    assert "a" in store.claimable_tenants(T0, partitions=sorted(ours), of=4)


def test_the_claim_by_turns_takes_each_tenants_turns_and_no_others(store: Store) -> None:
    backlog(store, "a", 10)
    backlog(store, "b", 10)
    backlog(store, "c", 10)
    got = store.claim(ClaimAsk("W", T0, 30, 8, fair=FairShare(turns={"a": 3, "b": 1})))
    assert tenants(got) == {"a": 3, "b": 1}
    # Within a tenant, the plain order (the oldest, here the first started).
    assert sorted(c.execution_id for c in got if c.tenant == "a") == ["a-000", "a-001", "a-002"]
    assert all(c.fence == 1 for c in got)
    # Never more than the limit; a tenant with fewer claimable than its turns gives what it
    # has (the caller learns it ran out); zero turns and unknown tenants take nothing.
    assert len(store.claim(ClaimAsk("W", T0, 30, 2, fair=FairShare(turns={"c": 5})))) == 2
    got = store.claim(ClaimAsk("W", T0, 30, 50, fair=FairShare(turns={"a": 20, "b": 0, "zz": 4})))
    assert tenants(got) == {"a": 7}
    assert store.claim(ClaimAsk("W", T0, 30, 5, fair=FairShare(turns={}))) == []
    # Partitions still apply.
    got = store.claim(
        ClaimAsk("W", T0, 30, 50, partitions=[1], of=2, fair=FairShare(turns={"b": 9}))
    )
    assert got and all(stable_shard(c.execution_id) % 2 == 1 for c in got)


def test_the_claim_by_turns_names_at_most_so_many_tenants() -> None:
    with pytest.raises(ValueError, match="at most"):
        FairShare(turns={f"t{i}": 1 for i in range(MAX_TURN_TENANTS + 1)})


def test_max_running_counts_every_workers_live_leases(store: Store) -> None:
    """A tenant's `max_running` caps its executions leased by all workers together: each
    claim takes at most the cap less the tenant's live leases, whoever holds them."""
    backlog(store, "a", 10)
    backlog(store, "b", 10)
    cap = {"a": 3}
    got = store.claim(
        ClaimAsk("W1", T0, 30, 8, fair=FairShare(turns={"a": 2, "b": 2}, max_running=cap))
    )
    assert tenants(got) == {"a": 2, "b": 2}
    # Another worker (another owner): A has one left of its 3, B is not capped.
    got = store.claim(
        ClaimAsk("W2", T0, 30, 8, fair=FairShare(turns={"a": 4, "b": 4}, max_running=cap))
    )
    assert tenants(got) == {"a": 1, "b": 4}
    got = store.claim(ClaimAsk("W3", T0, 30, 8, fair=FairShare(turns={"a": 4}, max_running=cap)))
    assert got == []
    # Several capped tenants in one claim, each held to its own cap.
    backlog(store, "c", 5)
    got = store.claim(
        ClaimAsk(
            "W3",
            T0,
            30,
            9,
            fair=FairShare(turns={"a": 3, "b": 3, "c": 3}, max_running={**cap, "c": 2}),
        )
    )
    assert tenants(got) == {"b": 3, "c": 2}


def test_max_running_frees_as_leases_end_or_expire(store: Store) -> None:
    backlog(store, "a", 10)
    cap = {"a": 2}
    first = store.claim(ClaimAsk("W1", T0, 30, 8, fair=FairShare(turns={"a": 8}, max_running=cap)))
    assert len(first) == 2
    # A lease given back (the execution suspended or ended) frees its place at once.
    store.release_owner("W1")
    again = store.claim(ClaimAsk("W2", T0, 30, 8, fair=FairShare(turns={"a": 8}, max_running=cap)))
    assert len(again) == 2
    assert (
        store.claim(ClaimAsk("W3", T0, 30, 8, fair=FairShare(turns={"a": 8}, max_running=cap)))
        == []
    )
    # Expired leases (a crashed worker) no longer count.
    later = T0 + timedelta(seconds=31)
    got = store.claim(ClaimAsk("W3", later, 30, 8, fair=FairShare(turns={"a": 8}, max_running=cap)))
    assert len(got) == 2


def test_max_running_needs_turns() -> None:
    with pytest.raises(ValueError, match="turns"):
        FairShare(max_running={"a": 1})


def test_the_claim_by_turns_serves_many_tenants_once_each_in_claim_order(store: Store) -> None:
    """A claim that gives many tenants one turn each (the common case with many tenants)
    takes each one's first claimable execution, beside tenants with several turns, and
    keeps partitions."""
    for tenant in ("a", "b", "c", "d"):
        backlog(store, tenant, 6)
    got = store.claim(
        ClaimAsk("W", T0, 30, 8, fair=FairShare(turns={"a": 1, "b": 1, "c": 3, "d": 1}))
    )
    assert sorted(c.execution_id for c in got) == [
        "a-000",
        "b-000",
        "c-000",
        "c-001",
        "c-002",
        "d-000",
    ]
    got = store.claim(ClaimAsk("W", T0, 30, 8, fair=FairShare(turns={"a": 1, "b": 1, "zz": 1})))
    assert sorted(c.execution_id for c in got) == ["a-001", "b-001"]
    # An expired lease comes after the free rows, as in the plain claim.
    later = T0 + timedelta(seconds=31)
    got = store.claim(ClaimAsk("W", later, 30, 8, fair=FairShare(turns={"a": 1, "d": 1})))
    assert sorted(c.execution_id for c in got) == ["a-002", "d-001"]
    ours = [p for p in range(2) if stable_shard("b-002") % 2 == p]
    got = store.claim(
        ClaimAsk("W", later, 30, 8, partitions=ours, of=2, fair=FairShare(turns={"b": 1}))
    )
    assert [c.execution_id for c in got] == ["b-002"]
    other = [1 - ours[0]]
    got = store.claim(
        ClaimAsk("W", later, 30, 8, partitions=other, of=2, fair=FairShare(turns={"b": 1}))
    )
    assert got and all(stable_shard(c.execution_id) % 2 == other[0] for c in got)
