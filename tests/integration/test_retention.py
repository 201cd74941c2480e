"""Retention end to end on every store, with a ManualClock: a pass purges the tenant's
finished executions older than its setting and nothing else (running and young ones stay),
a workflow's own setting wins over the tenant's, one tenant's retention never touches
another's, batches are bounded, settings are audited and kept beside the other tenant
settings, and what `export_to` writes reads back as the purged executions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from wovyr.activities.policy import RESTRICTED
from wovyr.clock import ManualClock
from wovyr.engine.engine import Engine
from wovyr.engine.retention import (
    Retention,
    parse_retention,
    purge_all,
    purge_expired,
    retention_of,
)
from wovyr.engine.tenants import set_policy
from wovyr.errors import InputError, NotFound
from wovyr.store.base import Store
from wovyr.testing import drain

QUICK = """
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: quick}
activities:
  - id: x
    set: {ok: true}
"""
HOLD = """
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: hold}
activities:
  - id: w
    wait: {signal: go}
"""


def _ids(engine: Engine) -> set[str]:
    return {r.id for r in engine.list(limit=100).items}


def _gone(engine: Engine, execution_id: str) -> bool:
    try:
        engine.query(execution_id, follow=False)
    except NotFound:
        return True
    return False


def test_a_pass_purges_only_old_finished_executions(engine: Engine, clock: ManualClock) -> None:
    engine.set_retention(Retention(days=7), by="test")
    old = [engine.start(QUICK).id, engine.start(QUICK).id]
    cancelled = engine.start(HOLD).id
    engine.cancel(cancelled)
    running = engine.start(HOLD).id  # as old, but it never finishes
    drain(engine)
    clock.advance(days=3)
    young = engine.start(QUICK).id
    drain(engine)
    clock.advance(1, days=4)  # the first ones finished 7 days ago and more

    report = purge_expired(engine)

    assert report.purged == 3 and not report.more and report.files == []
    assert all(_gone(engine, i) for i in [*old, cancelled])
    assert engine.store.history(old[0], tenant="default") == []
    assert _ids(engine) == {running, young}
    assert engine.query(running).status == "waiting"
    assert engine.query(young).status == "completed"
    assert purge_expired(engine).purged == 0  # nothing left to do
    # and the running one still runs on
    engine.signal(running, "go")
    drain(engine)
    assert engine.query(running).status == "completed"


def test_nothing_set_keeps_everything(engine: Engine, clock: ManualClock) -> None:
    first = engine.start(QUICK).id
    drain(engine)
    clock.advance(days=10_000)
    assert purge_expired(engine).purged == 0
    assert purge_all(engine) == []
    assert _ids(engine) == {first}


def test_a_workflows_own_setting_wins_over_the_tenants(engine: Engine, clock: ManualClock) -> None:
    quick = engine.start(QUICK).id
    hold = engine.start(HOLD).id
    engine.cancel(hold)
    drain(engine)
    clock.advance(days=2)
    # shorter for one workflow than for the tenant
    engine.set_retention(Retention(days=30, workflows={"quick": 1}), by="test")
    assert purge_expired(engine).purged == 1
    assert _ids(engine) == {hold}
    # longer for one workflow than for the tenant
    again = engine.start(QUICK).id
    drain(engine)
    engine.set_retention(Retention(days=1, workflows={"hold": 30}), by="test")
    clock.advance(days=2)
    assert purge_expired(engine).purged == 1
    assert _ids(engine) == {hold} and _gone(engine, again) and not _gone(engine, hold)
    # a workflow's setting applies where the tenant keeps everything
    engine.set_retention(Retention(workflows={"hold": 3}), by="test")
    assert purge_expired(engine).purged == 1
    assert _ids(engine) == set()
    assert quick not in _ids(engine)


def test_one_tenants_retention_never_touches_another_tenant(
    engine: Engine, clock: ManualClock
) -> None:
    acme, other = engine.for_tenant("acme"), engine.for_tenant("other")
    for tenant_engine in (acme, other, engine):
        tenant_engine.start(QUICK, execution_id="same-id")
    drain(engine)
    clock.advance(days=5)
    acme.set_retention(Retention(days=1), by="test")
    other.set_retention(Retention(days=30), by="test")

    reports = purge_all(engine)

    assert [(r.tenant, r.purged) for r in reports] == [("acme", 1), ("other", 0)]
    assert _gone(acme, "same-id")
    assert other.query("same-id").status == "completed"
    assert engine.query("same-id").status == "completed"  # tenant default: no setting


def test_batches_are_bounded_and_the_rest_waits_for_the_next_pass(
    engine: Engine, clock: ManualClock
) -> None:
    for _ in range(5):
        engine.start(QUICK)
    drain(engine)
    clock.advance(days=2)
    engine.set_retention(Retention(days=1), by="test")
    first = purge_expired(engine, batch=2, max_batches=2)
    assert (first.purged, first.more) == (4, True)
    second = purge_expired(engine, batch=2, max_batches=2)
    assert (second.purged, second.more) == (1, False)
    assert _ids(engine) == set()


def test_settings_are_checked_audited_and_kept_beside_the_others(
    store: Store, engine: Engine
) -> None:
    admin = engine.acting("local:test")
    admin.set_retention(Retention(days=90, workflows={"quick": 7}), by="cli")
    set_policy(store, "default", RESTRICTED, by="cli", at=engine.clock.now())  # keeps it
    assert retention_of(store, "default") == Retention(days=90, workflows={"quick": 7})
    assert engine.retention().days_for("quick") == 7
    assert engine.retention().days_for("other") == 90
    [record] = store.audit_records(tenant="default")
    assert (record.action, record.actor, record.details["days"]) == (
        "tenant.retention",
        "local:test",
        90,
    )
    admin.set_retention(Retention(), by="cli")  # back to keeping everything
    got = store.get_tenant("default")
    assert got is not None and got.retention is None and got.policy is not None
    with pytest.raises(InputError):
        parse_retention({"days": 0})
    with pytest.raises(InputError):
        parse_retention({"days": True})
    with pytest.raises(InputError):
        parse_retention({"workflows": {"quick": "7"}})
    with pytest.raises(InputError):
        parse_retention({"keep": 1})
    assert parse_retention(Retention(3, {"a": 4}, "/x").to_dict()) == Retention(3, {"a": 4}, "/x")


def test_a_purge_is_audited_per_batch(store: Store, engine: Engine, clock: ManualClock) -> None:
    for _ in range(3):
        engine.start(QUICK)
    drain(engine)
    clock.advance(days=2)
    engine.set_retention(Retention(days=1), by="test")
    purge_expired(engine, batch=2)
    records = [r for r in store.audit_records(tenant="default") if r.action == "executions.purge"]
    assert [(r.actor, r.details["count"]) for r in records] == [
        ("system:retention", 2),
        ("system:retention", 1),
    ]


def test_export_to_writes_the_purged_executions_first(
    engine: Engine, clock: ManualClock, tmp_path: Path
) -> None:
    started = [
        engine.start(QUICK, labels={"order": "o-1"}).id,
        engine.start(QUICK).id,
    ]
    drain(engine)
    views = {i: engine.query(i, follow=False).to_dict() for i in started}
    histories = {i: engine.history(i, follow=False) for i in started}
    clock.advance(days=2)
    folder = tmp_path / "archive"
    engine.set_retention(Retention(days=1, export_to=str(folder)), by="test")

    report = purge_expired(engine, batch=1)

    assert report.purged == 2 and len(report.files) == 2
    assert all(_gone(engine, i) for i in started)
    lines = [
        json.loads(line)
        for path in sorted(folder.iterdir())
        for line in path.read_text(encoding="utf-8").splitlines()
    ]
    assert sorted(line["id"] for line in lines) == sorted(started)
    for line in lines:
        ident = line["id"]
        assert line["tenant"] == "default"
        assert line["view"] == json.loads(json.dumps(views[ident], default=str))
        assert line["view"]["status"] == "completed"
        assert [(e["seq"], e["type"], e["data"]) for e in line["events"]] == [
            (e.seq, e.type, json.loads(json.dumps(e.data, default=str))) for e in histories[ident]
        ]
    assert {line["view"]["labels"].get("order") for line in lines} == {"o-1", None}
    assert all(path.stat().st_mode & 0o077 == 0 for path in folder.iterdir())


def test_an_export_that_fails_purges_nothing(
    engine: Engine, clock: ManualClock, tmp_path: Path
) -> None:
    started = engine.start(QUICK).id
    drain(engine)
    clock.advance(days=2)
    not_a_folder = tmp_path / "file"
    not_a_folder.write_text("", encoding="utf-8")
    engine.set_retention(Retention(days=1, export_to=str(not_a_folder)), by="test")
    with pytest.raises(FileExistsError):  # the folder cannot be made: it is a file
        purge_expired(engine)
    assert engine.query(started).status == "completed"
    assert not [r for r in engine.store.audit_records() if r.action == "executions.purge"]
