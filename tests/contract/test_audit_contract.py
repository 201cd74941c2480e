"""The audit chain on every store: one chain of linked hashes, a record appended only in the
transaction of a change that applies (never for a refused, conflicting or rolled-back one),
filters, anchors, and several writers (threads over several store objects) extending one
chain without a fork or a gap."""

from __future__ import annotations

import threading
from dataclasses import replace
from datetime import UTC, date, datetime, timedelta

import pytest

from wovyr.errors import QuotaExceeded
from wovyr.events import ExecutionStarted, SignalReceived
from wovyr.platform.audit import anchor_mac, verify_chain, write_anchor
from wovyr.store.audit import GENESIS, AuditAnchor, AuditEntry, payload_digest
from wovyr.store.base import CommitOutcome, DefinitionRecord, NewExecution, StepWrite, Store
from wovyr.store.platform import ApiKeyRecord, TenantRecord
from wovyr.store.postgres import PostgresStore
from wovyr.store.records import Debit
from wovyr.store.schedules import ScheduleRecord, ScheduleWrite
from wovyr.store.secrets import DataKeyRecord, KmsRootRecord, NewSecret
from wovyr.store.sqlite import SQLiteStore

AT = datetime(2030, 1, 1, 9, tzinfo=UTC)
KEY = b"k" * 32


def entry(action: str, target: str = "x", tenant: str = "t1", **details: object) -> AuditEntry:
    return AuditEntry(AT, tenant, "local:tester", action, target, details)


def _new(execution_id: str, *, audit: AuditEntry | None = None, **kw: object) -> NewExecution:
    event = ExecutionStarted(
        workflow="w",
        version="1",
        definition_hash="h",
        input={},
        parent_id=None,
        timeout=None,
        activities=[],
    ).at(AT)
    step = StepWrite(execution_id, 0, [event], {"seq": 1}, "running", AT, ready=True, tenant="t1")
    new = NewExecution(execution_id, "t1", "w", "1", "h", AT, {}, step, audit=audit)
    return replace(new, **kw)  # type: ignore[arg-type]


def _signal(execution_id: str, expected_seq: int, audit: AuditEntry | None) -> StepWrite:
    event = SignalReceived(name="go", payload=None).at(AT)
    return StepWrite(
        execution_id, expected_seq, [event], {}, "running", AT, tenant="t1", audit=audit
    )


def actions(store: Store) -> list[str]:
    return [r.action for r in store.audit_records()]


def test_records_form_one_chain_of_linked_hashes(store: Store) -> None:
    assert store.audit_head() is None
    first = store.append_audit(entry("a", payload=payload_digest({"x": 1})))
    second = store.append_audit(entry("b", tenant="t2"))
    third = store.append_audit(entry("c"))
    assert [first.seq, second.seq, third.seq] == [1, 2, 3]
    assert first.prev_hash == GENESIS
    assert second.prev_hash == first.hash and third.prev_hash == second.hash
    stored = store.audit_records()
    assert stored == [first, second, third]  # read back field for field, hashes included
    assert all(r.expected_hash() == r.hash for r in stored)
    assert store.audit_head() == third
    assert stored[0].details == {"payload": payload_digest({"x": 1})}
    # filters: tenant, after_seq, since, limit
    assert [r.seq for r in store.audit_records(tenant="t1")] == [1, 3]
    assert [r.seq for r in store.audit_records(after_seq=1, limit=1)] == [2]
    later = store.append_audit(replace(entry("d"), at=AT + timedelta(hours=1)))
    assert store.audit_records(since=AT + timedelta(minutes=1)) == [later]
    assert verify_chain(store, None).ok


def test_a_start_appends_only_when_it_creates(store: Store) -> None:
    created, _ = store.create_execution(_new("e1", audit=entry("execution.start", "e1")))
    assert created and actions(store) == ["execution.start"]
    # the same id again: found, not created, nothing appended
    created, _ = store.create_execution(_new("e1", audit=entry("execution.start", "e1")))
    assert not created and actions(store) == ["execution.start"]
    # refused by a quota: the start, its debit and its record roll back together
    limit = Debit("executions", 1, date(2030, 1, 1), 0)
    with pytest.raises(QuotaExceeded):
        store.create_execution(_new("e2", audit=entry("execution.start", "e2"), debits=[limit]))
    assert store.load("e2", "t1") is None
    assert actions(store) == ["execution.start"]


def test_a_step_appends_only_when_it_applies(store: Store) -> None:
    store.create_execution(_new("e1"))
    store.create_execution(_new("e2"))
    assert actions(store) == []  # a start without an entry (the system's own) is not audited
    ok = store.commit([_signal("e1", 1, entry("execution.signal", "e1"))])
    assert ok == [CommitOutcome.OK]
    stale = store.commit([_signal("e1", 1, entry("execution.signal", "e1"))])
    assert stale == [CommitOutcome.CONFLICT]
    assert actions(store) == ["execution.signal"]
    # an atomic batch that fails writes nothing, its records included
    outcomes = store.commit(
        [_signal("e2", 1, entry("execution.cancel", "e2")), _signal("e1", 1, None)], atomic=True
    )
    assert outcomes[1] is CommitOutcome.CONFLICT
    assert actions(store) == ["execution.signal"]
    # a batch: each applying step's record, in order, in one transaction
    outcomes = store.commit(
        [_signal("e2", 1, entry("one", "e2")), _signal("e1", 2, entry("two", "e1"))]
    )
    assert outcomes == [CommitOutcome.OK, CommitOutcome.OK]
    assert actions(store) == ["execution.signal", "one", "two"]
    assert verify_chain(store, None).ok


def test_platform_writes_append_when_they_change_something(store: Store) -> None:
    schedule = ScheduleRecord("s1", "w", {"every": 60.0}, AT, AT, tenant="t1")
    assert store.create_schedule(schedule, audit=entry("schedule.create", "s1"))
    assert not store.create_schedule(schedule, audit=entry("schedule.create", "s1"))
    bumped = replace(schedule, paused=True, version=1)
    assert store.update_schedule(ScheduleWrite(bumped, 0), audit=entry("schedule.pause", "s1"))
    assert not store.update_schedule(ScheduleWrite(bumped, 0), audit=entry("schedule.pause", "s1"))
    assert store.delete_schedule("s1", "t1", audit=entry("schedule.delete", "s1"))
    assert not store.delete_schedule("s1", "t1", audit=entry("schedule.delete", "s1"))

    definition = DefinitionRecord("h1", "w", "1", "{}", AT, "t1")
    assert store.apply_definition(definition, audit=entry("definition.apply")) == "applied"
    assert store.apply_definition(definition, audit=entry("definition.apply")) == "unchanged"
    other = replace(definition, hash="h2")
    assert store.apply_definition(other, audit=entry("definition.apply")) == "conflict"

    key = ApiKeyRecord("key_1", "t1", "viewer", "n", "wvr_x", "f" * 64, AT)
    assert store.create_api_key(key, audit=entry("api_key.create", "key_1"))
    assert not store.create_api_key(key, audit=entry("api_key.create", "key_1"))
    assert store.revoke_api_key("key_1", AT, audit=entry("api_key.revoke", "key_1"))
    assert not store.revoke_api_key("nope", AT, audit=entry("api_key.revoke", "nope"))
    store.put_tenant(TenantRecord("t1", None, AT, "cli"), audit=entry("tenant.policy", "t1"))
    assert actions(store) == [
        "schedule.create",
        "schedule.pause",
        "schedule.delete",
        "definition.apply",
        "api_key.create",
        "api_key.revoke",
        "tenant.policy",
    ]
    assert verify_chain(store, None).ok


def test_secret_and_kms_writes_append_when_they_change_something(store: Store) -> None:
    one = store.put_secret(
        NewSecret("t1", "A", b"c1", 1, AT, "cli"), audit=entry("secret.set", "A")
    )
    two = store.put_secret(
        NewSecret("t1", "A", b"c2", 1, AT, "cli"), audit=entry("secret.set", "A")
    )
    assert (one.version, two.version) == (1, 2)
    assert store.delete_secret("t1", "A", audit=entry("secret.delete", "A"))
    assert not store.delete_secret("t1", "A", audit=entry("secret.delete", "A"))  # missing
    assert not store.delete_secret("t2", "B", audit=entry("secret.delete", "B", "t2"))
    root = KmsRootRecord("r1", AT)
    store.put_kms_root(root, audit=entry("kms.escrowed", "r1", ""))
    store.put_kms_root(replace(root, rotated_at=AT), audit=entry("kms.rotate", "r1", ""))
    store.add_data_key(DataKeyRecord("t1", 1, b"k", "r1", AT))
    assert store.shred_data_keys("t1", audit=entry("tenant.shred", "t1")) == 1
    store.put_secret(NewSecret("t1", "Q", b"q", 1, AT, "cli"))  # without an entry: nothing appended
    assert store.delete_secret("t1", "Q")
    assert actions(store) == [
        "secret.set",
        "secret.set",
        "secret.delete",
        "kms.escrowed",
        "kms.rotate",
        "tenant.shred",
    ]
    assert [r.tenant for r in store.audit_records()][3:5] == ["", ""]
    assert verify_chain(store, None).ok


def test_anchors_are_kept_apart_and_checked_with_the_key(store: Store) -> None:
    assert write_anchor(store, KEY, AT) is None  # nothing to sign yet
    store.append_audit(entry("a"))
    store.append_audit(entry("b"))
    anchor = write_anchor(store, KEY, AT)
    assert anchor is not None and anchor.seq == 2
    assert anchor.mac == anchor_mac(KEY, 2, store.audit_records()[1].hash)
    assert store.audit_anchors() == [anchor]
    assert [r.seq for r in store.audit_records()] == [1, 2]  # the anchor is not a record
    verdict = verify_chain(store, KEY)
    assert verdict.ok and verdict.anchors == 1 and verdict.anchors_signed
    # an anchor signed with another key is refused when the key is known
    store.add_audit_anchor(AuditAnchor(1, store.audit_records()[0].hash, "00" * 32, AT))
    bad = verify_chain(store, KEY)
    assert bad.first is not None and bad.first[0] == 1 and "bad signature" in bad.first[1]
    # Without the key, signatures cannot be told apart: anchors that exist then fail the
    # check, unless the caller says it only checks links (a backup away from its key).
    blind = verify_chain(store, None)
    assert not blind.ok and blind.first is not None and blind.first[0] == 1
    assert "2 anchor(s) cannot be checked without the anchor key" in blind.first[1]
    assert verify_chain(store, None, unchecked_anchors_ok=True).ok


def _more(store: Store) -> list[Store]:
    """Other store objects over the same data (other processes' connections)."""
    if isinstance(store, SQLiteStore):
        return [SQLiteStore(store.path) for _ in range(3)]
    if isinstance(store, PostgresStore):
        return [PostgresStore(store.url, max_size=2) for _ in range(3)]
    return [store] * 3


def test_concurrent_writers_extend_one_chain(store: Store) -> None:
    others = _more(store)
    writers = [store, *others]
    barrier = threading.Barrier(len(writers))
    errors: list[BaseException] = []
    per_writer = 25

    def work(index: int, s: Store) -> None:
        try:
            barrier.wait()
            for i in range(per_writer):
                if i % 2:
                    s.append_audit(entry("plain", f"w{index}-{i}"))
                else:
                    name = f"w{index}-{i}"
                    s.create_execution(_new(name, audit=entry("execution.start", name)))
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i, s)) for i, s in enumerate(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    try:
        assert errors == []
        records = store.audit_records(limit=10_000)
        assert [r.seq for r in records] == list(range(1, len(writers) * per_writer + 1))
        assert len({r.target for r in records}) == len(records)  # none lost, none twice
        assert verify_chain(store, None).ok
    finally:
        for other in others:
            if other is not store:
                other.close()
