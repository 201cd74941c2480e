"""The store contract: every store (SQLite, PostgreSQL) passes these same tests."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from wovyr.events import Event
from wovyr.store.base import (
    ClaimAsk,
    CommitOutcome,
    DefinitionRecord,
    ExecutionFilter,
    NewExecution,
    StepWrite,
    Store,
)
from wovyr.store.platform import TenantRecord

T0 = datetime(2030, 1, 1, tzinfo=UTC)


def step(
    execution_id: str,
    seq: int,
    n_events: int = 1,
    *,
    fence: int | None = None,
    ready: bool = True,
    release: bool = False,
    status: str = "running",
    armed: tuple[tuple[str, datetime], ...] = (),
    removed: tuple[str, ...] = (),
    at: datetime = T0,
    tenant: str = "default",
) -> StepWrite:
    events = [Event("Thing", at, {"i": seq + i}) for i in range(n_events)]
    return StepWrite(
        execution_id=execution_id,
        expected_seq=seq,
        events=events,
        checkpoint={"seq": seq + n_events},
        status=status,
        updated_at=at,
        fence=fence,
        ready=ready,
        release_lease=release,
        timers_armed=armed,
        timers_removed=removed,
        tenant=tenant,
    )


def create(
    store: Store,
    execution_id: str,
    *,
    at: datetime = T0,
    tenant: str = "default",
    workflow: str = "wf",
    owner: str | None = None,
    status: str = "running",
    parent_id: str | None = None,
) -> None:
    created, record = store.create_execution(
        NewExecution(
            id=execution_id,
            tenant=tenant,
            workflow=workflow,
            version="1",
            definition_hash="h",
            created_at=at,
            input={"x": 1},
            first_step=step(execution_id, 0, status=status, at=at, tenant=tenant),
            parent_id=parent_id,
            lease_owner=owner,
            lease_until=at + timedelta(seconds=30) if owner else None,
        )
    )
    assert created and record.seq == 1


def test_create_is_idempotent_on_id(store: Store) -> None:
    create(store, "e1")
    created, record = store.create_execution(
        NewExecution(
            id="e1",
            tenant="default",
            workflow="other",
            version="9",
            definition_hash="h2",
            created_at=T0,
            input={},
            first_step=step("e1", 0),
        )
    )
    assert not created and record.workflow == "wf"
    assert len(store.history("e1", tenant="default")) == 1


def test_commit_appends_events_in_order_and_checks_sequence(store: Store) -> None:
    create(store, "e1")
    assert store.commit([step("e1", 1, 3)]) == [CommitOutcome.OK]
    assert store.commit([step("e1", 1, 1)]) == [CommitOutcome.CONFLICT]
    assert store.commit([step("missing", 0)]) == [CommitOutcome.NOT_FOUND]
    history = store.history("e1", tenant="default")
    assert [e.seq for e in history] == [1, 2, 3, 4]
    assert [e.data["i"] for e in history[1:]] == [1, 2, 3]
    record = store.load("e1", "default")
    assert record is not None and record.seq == 4 and record.checkpoint == {"seq": 4}
    assert [e.seq for e in store.history("e1", after_seq=2, limit=1, tenant="default")] == [3]


def test_a_batch_commits_each_step_on_its_own_merits(store: Store) -> None:
    create(store, "a")
    create(store, "b")
    outcomes = store.commit([step("a", 1), step("b", 7), step("a", 2)])
    assert outcomes == [CommitOutcome.OK, CommitOutcome.CONFLICT, CommitOutcome.OK]
    assert (
        len(store.history("a", tenant="default")) == 3
        and len(store.history("b", tenant="default")) == 1
    )


def test_claim_lease_fence_and_takeover(store: Store) -> None:
    create(store, "e1")
    [a] = store.claim(ClaimAsk("A", T0, 30, 10))
    assert a.execution_id == "e1" and a.fence == 1
    assert store.claim(ClaimAsk("B", T0 + timedelta(seconds=29), 30, 10)) == []
    [b] = store.claim(ClaimAsk("B", T0 + timedelta(seconds=31), 30, 10))
    assert b.fence == 2
    assert store.commit([step("e1", 1, fence=a.fence)]) == [CommitOutcome.LEASE_LOST]
    assert store.commit([step("e1", 1, fence=b.fence, release=True, ready=False)]) == [
        CommitOutcome.OK
    ]
    record = store.load("e1", "default")
    assert record is not None and record.lease_owner is None and not record.ready
    assert store.claim(ClaimAsk("C", T0 + timedelta(hours=1), 30, 10)) == []


def test_claim_only_and_limit(store: Store) -> None:
    for i in range(5):
        create(store, f"e{i}")
    assert [c.execution_id for c in store.claim(ClaimAsk("A", T0, 30, 10, only=["e3"]))] == ["e3"]
    assert len(store.claim(ClaimAsk("A", T0, 30, 2))) == 2
    assert store.ready_count(T0) == 2


def test_renew_and_release_owner(store: Store) -> None:
    create(store, "e1", owner="A")
    leases = store.renew_leases("A", T0 + timedelta(seconds=20), 30)
    assert set(leases) == {("default", "e1")} and leases[("default", "e1")].fence == 1
    assert store.claim(ClaimAsk("B", T0 + timedelta(seconds=40), 30, 10)) == []  # renewed to 50 s
    assert store.release_owner("A") == 1
    assert [
        c.execution_id for c in store.claim(ClaimAsk("B", T0 + timedelta(seconds=40), 30, 10))
    ] == ["e1"]


def test_timers_follow_steps_and_come_due_in_order(store: Store) -> None:
    create(store, "e1")
    t1, t2 = T0 + timedelta(minutes=5), T0 + timedelta(minutes=1)
    store.commit([step("e1", 1, armed=(("late", t1), ("early", t2)))])
    assert store.next_timer_at() == t2
    assert [t.timer_id for t in store.due_timers(T0 + timedelta(hours=1), 10)] == ["early", "late"]
    assert [t.timer_id for t in store.due_timers(T0 + timedelta(minutes=2), 10)] == ["early"]
    store.commit([step("e1", 2, removed=("early",))])
    assert [t.timer_id for t in store.due_timers(T0 + timedelta(hours=1), 10)] == ["late"]


def test_list_filters_tenants_and_pages(store: Store) -> None:
    for i in range(7):
        create(store, f"e{i}", at=T0 + timedelta(seconds=i), workflow="wf" if i % 2 else "other")
    create(store, "secret", tenant="b", at=T0 + timedelta(seconds=9))
    page = store.list_executions(ExecutionFilter(limit=3))
    assert [r.id for r in page.items] == ["e6", "e5", "e4"]
    page = store.list_executions(ExecutionFilter(limit=3, cursor=page.next_cursor))
    assert [r.id for r in page.items] == ["e3", "e2", "e1"]
    page = store.list_executions(ExecutionFilter(limit=3, cursor=page.next_cursor))
    assert [r.id for r in page.items] == ["e0"] and page.next_cursor is None
    wf = store.list_executions(ExecutionFilter(workflow="wf", limit=10))
    assert [r.id for r in wf.items] == ["e5", "e3", "e1"]
    ranged = store.list_executions(
        ExecutionFilter(
            created_after=T0 + timedelta(seconds=2),
            created_before=T0 + timedelta(seconds=4),
            limit=10,
        )
    )
    assert [r.id for r in ranged.items] == ["e3", "e2"]
    assert store.load("secret", "default") is None and store.load("secret", tenant="b") is not None
    assert [r.id for r in store.list_executions(ExecutionFilter(tenant="b")).items] == ["secret"]


def test_the_waiting_filter_tells_waiting_from_running_rows(store: Store) -> None:
    """`waiting` True lists the rows with a `waiting_on` text, False those without; with
    status `running` these are the executions shown `waiting` and `running`."""
    for i, (eid, status, waits) in enumerate(
        [("busy", "running", None), ("waits", "running", "child c"), ("done", "completed", None)]
    ):
        create(store, eid, at=T0 + timedelta(seconds=i))
        write = replace(step(eid, 1, status=status), waiting_on=waits)
        assert store.commit([write]) == [CommitOutcome.OK]

    def ids(status: str | None = None, waiting: bool | None = None) -> list[str]:
        query = ExecutionFilter(status=status, waiting=waiting)
        return [r.id for r in store.list_executions(query).items]

    shown = {r.id: r.shown_status for r in store.list_executions(ExecutionFilter()).items}
    assert shown == {"busy": "running", "waits": "waiting", "done": "completed"}


def test_definitions_by_hash_are_stored_once_and_name_nothing(store: Store) -> None:
    store.put_definition(DefinitionRecord("h1", "wf", "1", "src1", T0))
    store.put_definition(DefinitionRecord("h2", "wf", "1", "src2", T0 + timedelta(seconds=1)))
    store.put_definition(DefinitionRecord("h1", "wf", "1", "src1", T0 + timedelta(seconds=2)))
    got = store.get_definition("h1")
    assert got is not None and got.source == "src1" and got.created_at == T0
    assert store.get_definition("h1", tenant="other") is None
    # Stored by hash (an ad-hoc run) is not registered: the name and version stay free.
    assert store.registered_definition("wf") is None
    assert store.apply_definition(DefinitionRecord("h3", "wf", "1", "src3", T0)) == "applied"
    registered = store.registered_definition("wf", "1")
    assert registered is not None and registered.hash == "h3"


def test_an_atomic_batch_writes_all_or_nothing(store: Store) -> None:
    create(store, "a")
    create(store, "b")
    assert store.commit([step("a", 1), step("b", 5)], atomic=True)[1] is CommitOutcome.CONFLICT
    assert (
        len(store.history("a", tenant="default")) == 1
        and len(store.history("b", tenant="default")) == 1
    )
    assert store.commit([step("a", 1), step("b", 1)], atomic=True) == [CommitOutcome.OK] * 2
    assert (
        len(store.history("a", tenant="default")) == 2
        and len(store.history("b", tenant="default")) == 2
    )


def test_values_are_stored_as_json_and_a_batch_with_an_unstorable_one_writes_nothing(
    store: Store,
) -> None:
    create(store, "a")
    create(store, "b")
    odd = replace(
        step("a", 1),
        events=[Event("Thing", T0, {"t": (1, 2), "nan": float("nan"), "at": T0})],
        output={"big": 2**70},
    )
    assert store.commit([odd]) == [CommitOutcome.OK]
    assert store.history("a", tenant="default")[-1].data == {
        "t": [1, 2],
        "nan": None,
        "at": T0.isoformat(),
    }
    loaded = store.load("a", "default")
    assert loaded is not None and loaded.output == {"big": 2**70}

    bad = replace(step("b", 1), output={"x": object()})
    with pytest.raises(TypeError, match="cannot store"):
        store.commit([step("a", 2), bad])
    assert (
        len(store.history("a", tenant="default")) == 2
        and len(store.history("b", tenant="default")) == 1
    )
    assert store.commit([step("a", 2), step("b", 1)]) == [CommitOutcome.OK] * 2


def test_revoked_sessions_are_kept_until_purged_after_they_expire(store: Store) -> None:
    assert not store.session_revoked("s1")
    store.revoke_session("s1", T0 + timedelta(hours=1))
    store.revoke_session("s2", T0 + timedelta(hours=3))
    store.revoke_session("s2", T0 + timedelta(hours=2))  # the later `until` is kept
    assert store.session_revoked("s1") and store.session_revoked("s2")
    assert not store.session_revoked("s3")
    assert store.purge_revoked_sessions(T0 + timedelta(hours=1)) == 0
    assert store.purge_revoked_sessions(T0 + timedelta(hours=2, minutes=59)) == 1
    assert not store.session_revoked("s1") and store.session_revoked("s2")


def test_tenant_settings_are_kept_per_tenant_and_replaced_whole(store: Store) -> None:
    assert store.get_tenant("beta") is None and store.list_tenants() == []
    policy = {"shell": False, "allow_networks": ["10.0.0.0/8"], "nested": {"a": [1, 2]}}
    store.put_tenant(TenantRecord("beta", policy, T0, "cli"))
    store.put_tenant(TenantRecord("alpha", None, T0, "key_1"))
    got = store.get_tenant("beta")
    assert got == TenantRecord("beta", policy, T0, "cli")
    later = T0 + timedelta(minutes=5)
    store.put_tenant(TenantRecord("beta", {"shell": True}, later, "key_2"))
    assert store.get_tenant("beta") == TenantRecord("beta", {"shell": True}, later, "key_2")
    assert [t.tenant for t in store.list_tenants()] == ["alpha", "beta"]
    assert store.get_tenant("alpha") == TenantRecord("alpha", None, T0, "key_1")
    assert store.get_tenant("gamma") is None


def test_the_same_id_in_two_tenants_is_two_executions(store: Store) -> None:
    """Executions are named by (tenant, id): create, commit, history, timers, claims,
    leases and children of one tenant never touch the other's execution of the same id."""
    create(store, "same", tenant="a", workflow="wa")
    create(store, "same", tenant="b", workflow="wb", owner="W")
    created, existing = store.create_execution(
        NewExecution(
            id="same",
            tenant="b",
            workflow="other",
            version="9",
            definition_hash="h2",
            created_at=T0,
            input={},
            first_step=step("same", 0, tenant="b"),
        )
    )
    assert not created and existing.tenant == "b" and existing.workflow == "wb"
    a, b = store.load("same", "a"), store.load("same", "b")
    assert a is not None and b is not None
    assert (a.tenant, a.workflow, b.tenant, b.workflow) == ("a", "wa", "b", "wb")
    assert store.load("same", "c") is None
    # A commit goes to its tenant's execution only, checked on that execution's seq.
    t1 = T0 + timedelta(minutes=1)
    assert store.commit([step("same", 1, 2, tenant="a", armed=(("t", t1),))]) == [CommitOutcome.OK]
    assert store.commit([step("same", 3, tenant="b", fence=1)]) == [CommitOutcome.CONFLICT]
    assert store.commit([step("same", 1, tenant="b", fence=2)]) == [CommitOutcome.LEASE_LOST]
    assert store.commit([step("same", 1, tenant="c")]) == [CommitOutcome.NOT_FOUND]
    assert [e.seq for e in store.history("same", tenant="a")] == [1, 2, 3]
    assert [e.seq for e in store.history("same", tenant="b")] == [1]
    assert store.history("same", tenant="c") == []
    # Both in one batch (the set-based path on PostgreSQL): each to its own.
    both = [step("same", 3, tenant="a", removed=("t",)), step("same", 1, tenant="b", fence=1)]
    assert store.commit(both) == [CommitOutcome.OK, CommitOutcome.OK]
    assert [len(store.history("same", tenant=t)) for t in ("a", "b")] == [4, 2]
    assert store.due_timers(t1, 10) == []
    store.commit([step("same", 2, tenant="b", fence=1, armed=(("t", t1),))])
    [due] = store.due_timers(t1, 10)
    assert (due.tenant, due.execution_id, due.timer_id) == ("b", "same", "t")
    # Claims and leases name the tenant; `only` is of one tenant.
    assert set(store.renew_leases("W", T0, 30)) == {("b", "same")}
    assert store.release_owner("W") == 1
    claims = store.claim(ClaimAsk("X", T0, 30, 10, only=["same"], tenant="a"))
    assert [(c.tenant, c.execution_id) for c in claims] == [("a", "same")]
    rest = store.claim(ClaimAsk("Y", T0, 30, 10))
    assert [(c.tenant, c.execution_id) for c in rest] == [("b", "same")]
    assert set(store.renew_leases("X", T0, 30)) == {("a", "same")}
    # Children are found in their parent's tenant.
    create(store, "kid", tenant="a", parent_id="same")
    create(store, "kid", tenant="b", parent_id="same", at=T0 + timedelta(seconds=1))
    for tenant in ("a", "b"):
        kids = store.list_executions(ExecutionFilter(tenant=tenant, parent_id="same"))
        assert [(k.tenant, k.id) for k in kids.items] == [(tenant, "kid")]
