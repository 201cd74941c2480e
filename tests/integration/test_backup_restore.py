"""Backup while two writers keep signalling and completing executions, wipe, restore: every
kind of record is back, secrets open with the escrowed root key, the audit chain verifies,
a waiting execution completes; UI sessions issued before have ended (no backup carries the
session key). SQLite and PostgreSQL."""

from __future__ import annotations

import shutil
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest
from tests.conftest import POSTGRES_URL, _require_postgres
from tests.pg_schemas import schema_url

from wovyr.engine.engine import Engine
from wovyr.engine.quotas import Quotas, day_of
from wovyr.platform.audit import verify_chain, write_anchor
from wovyr.platform.auth import Authenticator
from wovyr.platform.backup import read_manifest, restore_backup, take_backup, verify_backup
from wovyr.platform.kms import ROOT_ENV, load_kms
from wovyr.platform.secrets import Secrets, audit_anchor_key, find_audit_anchor_key
from wovyr.scheduling.schedules import Schedules
from wovyr.server.ui.session import SECRET_FILE, SessionCodec, load_secret
from wovyr.store import open_store
from wovyr.store.base import ExecutionFilter
from wovyr.store.platform import IdempotencyRecord
from wovyr.testing import drain

FLOW = """
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: flow}
activities:
  - id: hold
    wait: {signal: go}
  - id: done
    needs: [hold]
    set: {ok: true}
"""


@dataclass
class Installation:
    url: str
    home: Path
    target: str  # where the wiped installation is restored (the same place)
    kind: str


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def installation(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Installation]:
    home = tmp_path / "home"
    if request.param == "sqlite":
        url = f"sqlite:///{home / 'wovyr.db'}"
        yield Installation(url, home, url, "sqlite")
        return
    _require_postgres()
    import psycopg

    schema = f"bk_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(POSTGRES_URL, autocommit=True) as admin:
        admin.execute(f"CREATE SCHEMA {schema}")
    url = schema_url(POSTGRES_URL, schema)
    try:
        yield Installation(url, home, url, "postgres")
    finally:
        with psycopg.connect(POSTGRES_URL, autocommit=True) as admin:
            admin.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
            admin.execute(f"DROP SCHEMA IF EXISTS {schema}__pre_restore CASCADE")


def _wipe(installation: Installation) -> None:
    """The machine is lost: its home and its store are gone."""
    shutil.rmtree(installation.home)
    if installation.kind == "postgres":
        import psycopg

        with psycopg.connect(installation.url, autocommit=True) as conn:
            schema = conn.execute("SELECT current_schema()").fetchone()
            assert schema is not None
            conn.execute(f"DROP SCHEMA {schema[0]} CASCADE")


class Writer(threading.Thread):
    """Starts, signals and completes executions of `flow` until told to stop."""

    def __init__(self, url: str, name: str) -> None:
        super().__init__(daemon=True)
        self.url, self.name_ = url, name
        self.stop = threading.Event()
        self.done: list[str] = []
        self.error: BaseException | None = None
        self.progress = threading.Condition()

    def run(self) -> None:
        store = open_store(self.url, db_clock=False)
        engine = Engine(store)
        try:
            n = 0
            while not self.stop.is_set():
                n += 1
                execution_id = f"{self.name_}-{n}"
                engine.start(name="flow", execution_id=execution_id)
                engine.signal(execution_id, "go")
                drain(engine, only=[execution_id])
                with self.progress:
                    self.done.append(execution_id)
                    self.progress.notify_all()
        except BaseException as exc:  # reported by the test
            self.error = exc
        finally:
            store.close()

    def wait_for(self, count: int, timeout: float = 60.0) -> None:
        with self.progress:
            assert self.progress.wait_for(
                lambda: len(self.done) >= count or self.error is not None, timeout
            ), f"{self.name_} made no progress"
        assert self.error is None, self.error


def test_backup_under_writers_wipe_restore(installation: Installation, tmp_path: Path) -> None:
    store = open_store(installation.url, db_clock=False)
    engine = Engine(store).acting("local:test")
    kms = load_kms(installation.home, {}, warn=False)
    secrets = Secrets(store, kms)
    now = datetime.now(UTC)
    engine.apply(FLOW)
    engine.set_quotas(Quotas(executions_per_day=100_000), by="test")
    waiter = engine.start(name="flow", execution_id="waiter").id
    drain(engine, only=[waiter])
    assert engine.query(waiter).status == "waiting"
    schedule = Schedules(engine).create("nightly", workflow="flow", cron="0 3 * * *")
    auth = Authenticator(store)
    key_id, token = auth.create_key("default", "operator", "ops", actor="local:test")
    idem = IdempotencyRecord("default", "req-1", "f" * 64, waiter, now)
    store.claim_idempotency_key(idem)
    secrets.set_secret("default", "API_TOKEN", "s3cret-value", by="t", at=now, actor="local:t")
    write_anchor(store, audit_anchor_key(secrets, now, store), now)
    codec = SessionCodec(load_secret(installation.home))
    principal = auth.verify(token)
    assert principal is not None
    _, cookie = codec.issue(principal)

    writers = [Writer(installation.url, "a"), Writer(installation.url, "b")]
    for w in writers:
        w.start()
    try:
        for w in writers:
            w.wait_for(3)
        before = {w.name_: len(w.done) for w in writers}
        finished_before = [e for w in writers for e in list(w.done)]
        waiter_history = [(e.seq, e.type) for e in engine.history(waiter)]
        report = take_backup(store, installation.home, tmp_path / "bk", kms=kms, at=now)
        for w in writers:  # they kept going through the backup and after it
            w.wait_for(before[w.name_] + 3)
    finally:
        for w in writers:
            w.stop.set()
        for w in writers:
            w.join(60)
    assert all(w.error is None for w in writers), [w.error for w in writers]
    usage_before = store.quota_usage("default", day_of(now))
    store.close()

    assert report.manifest.data["store"]["kind"] == installation.kind
    assert {f["name"] for f in report.manifest.files} == {report.manifest.store_file}
    assert SECRET_FILE not in {f["name"] for f in report.manifest.files}  # the host's only
    assert verify_backup(tmp_path / "bk", env={}).decrypted

    # The machine is lost: keep only the escrowed root key.
    escrowed = kms.root.key.hex()
    _wipe(installation)
    env = {ROOT_ENV: escrowed}
    restored = restore_backup(
        tmp_path / "bk", installation.target, installation.home, actor="local:test", at=now, env=env
    )
    assert restored.data_keys >= 2  # the tenant's and the audit anchors'

    store2 = open_store(installation.target, db_clock=False)
    try:
        engine2 = Engine(store2)
        ids = {
            r.id
            for r in store2.list_executions(ExecutionFilter(tenant="default", limit=10_000)).items
        }
        assert {waiter, *finished_before} <= ids
        for execution_id in finished_before:
            assert engine2.query(execution_id).status == "completed"
        for execution_id in ids:  # every restored log folds to its checkpoint
            record = engine2.get(execution_id)
            assert len(engine2.history(execution_id)) == record.seq
        assert [(e.seq, e.type) for e in engine2.history(waiter)] == waiter_history
        assert Schedules(engine2).get("nightly").spec == schedule.spec
        assert store2.get_definition(engine2.get(waiter).definition_hash) is not None
        back = Authenticator(store2).verify(token)
        assert back is not None and back.key_id == key_id
        other = IdempotencyRecord("default", "req-1", "0" * 64, "x", now)
        assert store2.claim_idempotency_key(other) == idem
        kms2 = load_kms(installation.home, env, warn=False)
        assert Secrets(store2, kms2).resolve_secret("default", "API_TOKEN") == "s3cret-value"
        usage = store2.quota_usage("default", day_of(now))
        assert usage.get("executions", 0) >= len(finished_before) + 1
        assert usage.get("executions", 0) <= usage_before.get("executions", 0)
        verdict = verify_chain(store2, find_audit_anchor_key(Secrets(store2, kms2)))
        assert verdict.ok and verdict.anchors >= 1, verdict.problems
        head = store2.audit_head()
        assert head is not None and head.action == "backup.restore"
        # The web UI's session key is not in backups: sessions signed before have ended.
        assert SessionCodec(load_secret(installation.home)).read(cookie) is None
        # A waiting execution resumes and completes.
        engine2.signal(waiter, "go")
        drain(engine2, only=[waiter])
        assert engine2.query(waiter).status == "completed"
    finally:
        store2.close()
    assert read_manifest(tmp_path / "bk").audit_head is not None
