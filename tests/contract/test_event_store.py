"""The events store on every store: triggers (by name, topic and webhook id), received
events paged newest first, dedup keys with an expiry, webhook endpoints, and the outbox
written by the store in the transaction of the step that ends an execution (only for the
endpoints that take the event; nothing when the step is refused), leased, attempted, dead.
Another tenant's objects answer exactly like missing ones."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from tests.contract.test_store_contract import create, step

from wovyr.errors import StoreError
from wovyr.events import Event
from wovyr.store.audit import AuditEntry
from wovyr.store.base import CommitOutcome, NewExecution, Store
from wovyr.store.events import (
    AttemptRecord,
    DedupClaim,
    TriggerEventRecord,
    TriggerRecord,
    WebhookEndpointRecord,
    delivery_id,
)

AT = datetime(2030, 1, 1, 9, tzinfo=UTC)


def trigger(tenant: str = "t1", name: str = "orders", **kw: object) -> TriggerRecord:
    record = TriggerRecord(tenant, name, "orders.created", None, {"spec": {"a": 1}}, AT, "alice")
    return replace(record, **kw)  # type: ignore[arg-type]


def endpoint(tenant: str = "default", name: str = "ops", **kw: object) -> WebhookEndpointRecord:
    record = WebhookEndpointRecord(
        tenant,
        name,
        "http://127.0.0.1:9/hook",
        ("execution.completed", "execution.failed"),
        None,
        ("HOOK_KEY", "OLD_KEY"),
        AT,
        "alice",
    )
    return replace(record, **kw)  # type: ignore[arg-type]


def test_triggers_read_back_by_name_topic_and_hook(store: Store) -> None:
    assert store.put_trigger(trigger()) == "applied"
    assert store.put_trigger(trigger()) == "unchanged"
    hooked = trigger(name="gh", topic="github", hook_id="hk_abc")
    assert store.put_trigger(hooked, audit=AuditEntry(AT, "t1", "k", "trigger.apply", "gh", {}))
    assert store.get_trigger("t1", "orders") == trigger()
    assert store.list_triggers("t1") == [hooked, trigger()]
    assert store.list_triggers("t1", "github") == [hooked]
    assert store.trigger_by_hook("hk_abc") == hooked
    assert store.trigger_by_hook("hk_other") is None
    assert store.audit_records()[-1].action == "trigger.apply"
    changed = trigger(document={"spec": {"a": 2}}, updated_at=AT + timedelta(seconds=1))
    assert store.put_trigger(changed) == "applied"
    assert store.get_trigger("t1", "orders") == changed


def test_a_webhook_id_is_one_triggers(store: Store) -> None:
    store.put_trigger(trigger(hook_id="hk_1"))
    with pytest.raises(StoreError):
        store.put_trigger(trigger(tenant="t2", hook_id="hk_1"))
    assert store.get_trigger("t2", "orders") is None


def test_another_tenants_trigger_is_missing(store: Store) -> None:
    store.put_trigger(trigger())
    assert store.get_trigger("t2", "orders") is None
    assert store.list_triggers("t2") == []
    assert not store.delete_trigger("t2", "orders")
    assert store.delete_trigger("t1", "orders")
    assert store.get_trigger("t1", "orders") is None


def received(i: int, tenant: str = "t1", outcome: str = "started") -> TriggerEventRecord:
    return TriggerEventRecord(
        tenant,
        f"ev{i:03d}",
        AT + timedelta(seconds=i // 2),  # pairs share a time: the id breaks the tie
        "api",
        "orders.created",
        "orders",
        outcome,
        "",
        f"x{i}",
        f"k{i}",
        10 + i,
    )


def test_received_events_page_newest_first(store: Store) -> None:
    for i in range(7):
        store.record_trigger_event(received(i))
    store.record_trigger_event(received(50, tenant="t2"))
    seen: list[str] = []
    page = store.list_trigger_events("t1", limit=3)
    while True:
        seen += [e.id for e in page.items]
        if page.next is None:
            break
        page = store.list_trigger_events("t1", before=page.next, limit=3)
    assert seen == [f"ev{i:03d}" for i in range(6, -1, -1)]
    assert store.list_trigger_events("t1", limit=1).items[0] == received(6)
    assert [e.id for e in store.list_trigger_events("t2").items] == ["ev050"]
    assert store.list_trigger_events("t1", trigger="other").items == []


def test_a_received_event_reads_back_by_id_in_its_tenant_once(store: Store) -> None:
    store.record_trigger_event(received(3))
    store.record_trigger_event(replace(received(3), outcome="duplicate"))  # the id is taken
    assert store.get_trigger_event("t1", "ev003") == received(3)
    assert store.get_trigger_event("t2", "ev003") is None
    assert store.get_trigger_event("t1", "ev004") is None


def test_trigger_starts_count_in_the_window(store: Store) -> None:
    for i in range(4):
        store.record_trigger_event(received(i, outcome="started" if i != 1 else "filtered"))
    assert store.count_trigger_starts("t1", "orders", AT) == 3
    assert store.count_trigger_starts("t1", "orders", AT + timedelta(seconds=1)) == 2
    assert store.count_trigger_starts("t2", "orders", AT) == 0


def test_a_dedup_key_is_held_until_it_expires(store: Store) -> None:
    until = AT + timedelta(hours=1)
    assert store.claim_dedup_key(DedupClaim("t1", "orders", "k", "x1", AT, until)) is None
    assert store.claim_dedup_key(DedupClaim("t1", "orders", "k", "x2", AT, until)) == "x1"
    # Per tenant, and per trigger:
    assert store.claim_dedup_key(DedupClaim("t2", "orders", "k", "y1", AT, until)) is None
    assert store.claim_dedup_key(DedupClaim("t1", "other", "k", "z1", AT, until)) is None
    later = until + timedelta(seconds=1)
    assert store.claim_dedup_key(DedupClaim("t1", "orders", "k", "x3", until, later)) is None
    assert store.claim_dedup_key(DedupClaim("t1", "orders", "k", "x4", until, later)) == "x3"


def test_endpoints_read_back_and_stay_in_their_tenant(store: Store) -> None:
    store.put_webhook_endpoint(endpoint())
    assert store.get_webhook_endpoint("default", "ops") == endpoint()
    assert store.list_webhook_endpoints("default") == [endpoint()]
    assert store.get_webhook_endpoint("t2", "ops") is None
    assert not store.delete_webhook_endpoint("t2", "ops")
    moved = endpoint(url="https://example.com/x", secrets=("NEW",))
    store.put_webhook_endpoint(moved)
    assert store.list_webhook_endpoints("default") == [moved]
    assert store.delete_webhook_endpoint("default", "ops")
    assert store.list_webhook_endpoints("default") == []


def ending(execution_id: str, seq: int, kind: str, tenant: str = "default") -> object:
    base = step(execution_id, seq, status=kind, tenant=tenant)
    type_ = {"completed": "ExecutionCompleted", "failed": "ExecutionFailed"}[kind]
    return replace(base, events=[Event(type_, AT, {})], ready=False)


def test_the_outbox_is_written_with_the_step_that_ends_an_execution(store: Store) -> None:
    store.put_webhook_endpoint(endpoint())
    store.put_webhook_endpoint(endpoint(name="only-failed", events=("execution.failed",)))
    store.put_webhook_endpoint(endpoint(tenant="t2"))
    create(store, "x1")
    assert store.commit([step("x1", 1)]) == [CommitOutcome.OK]  # not an end: nothing
    assert store.list_deliveries("default").items == []
    assert store.commit([ending("x1", 2, "completed")]) == [CommitOutcome.OK]  # type: ignore[list-item]
    [delivery] = store.list_deliveries("default").items
    assert delivery.id == delivery_id("default", "ops", "x1", "3")
    assert (delivery.endpoint, delivery.event, delivery.status) == (
        "ops",
        "execution.completed",
        "pending",
    )
    assert delivery.payload["execution"] == {
        "id": "x1",
        "workflow": "wf",
        "version": "1",
        "status": "completed",
        "waiting_on": None,
    }
    assert delivery.payload["id"] == delivery.id
    assert store.list_deliveries("t2").items == []


def test_a_refused_step_writes_no_outbox_row(store: Store) -> None:
    store.put_webhook_endpoint(endpoint())
    create(store, "x1")
    assert store.commit([ending("x1", 5, "failed")]) == [CommitOutcome.CONFLICT]  # type: ignore[list-item]
    assert store.list_deliveries("default").items == []


def test_deliveries_are_leased_attempted_and_listed(store: Store) -> None:
    store.put_webhook_endpoint(endpoint())
    for i in range(3):
        create(store, f"x{i}")
        store.commit([ending(f"x{i}", 1, "completed")])  # type: ignore[list-item]
    claimed = store.claim_deliveries(AT, 30, 10)
    assert sorted(d.execution_id for d in claimed) == ["x0", "x1", "x2"]
    assert store.claim_deliveries(AT + timedelta(seconds=29), 30, 10) == []  # leased
    first = claimed[0]
    store.record_attempt(
        AttemptRecord("default", first.id, 1, AT, 500, "HTTP 500"),
        status="pending",
        next_at=AT + timedelta(seconds=5),
        last_error="HTTP 500",
    )
    store.record_attempt(
        AttemptRecord("default", first.id, 2, AT + timedelta(seconds=5), 200),
        status="delivered",
        next_at=AT + timedelta(seconds=5),
        last_error="",
    )
    done = store.get_delivery("default", first.id)
    assert done is not None and (done.status, done.attempts) == ("delivered", 2)
    assert [a.status_code for a in store.delivery_attempts("default", first.id)] == [500, 200]
    assert store.get_delivery("t2", first.id) is None
    assert store.delivery_attempts("t2", first.id) == []
    again = store.claim_deliveries(AT + timedelta(seconds=31), 30, 10)
    assert sorted(d.id for d in again) == sorted(d.id for d in claimed[1:])  # not the sent one
    page = store.list_deliveries("default", limit=2)
    rest = store.list_deliveries("default", before=page.next, limit=2)
    assert len(page.items) == 2 and len(rest.items) == 1 and rest.next is None
    assert [d.id for d in store.list_deliveries("default", status="delivered").items] == [first.id]


def test_a_run_that_ends_in_its_first_step_has_its_outbox_row(store: Store) -> None:
    store.put_webhook_endpoint(endpoint())
    first = replace(step("x1", 0), events=[Event("ExecutionCompleted", AT, {})], status="completed")
    store.create_execution(
        NewExecution(
            id="x1",
            tenant="default",
            workflow="wf",
            version="1",
            definition_hash="h",
            created_at=AT,
            input={},
            first_step=first,
        )
    )
    [delivery] = store.list_deliveries("default").items
    assert delivery.id == delivery_id("default", "ops", "x1", "1")
    assert delivery.payload["execution"]["status"] == "completed"
