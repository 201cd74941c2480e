"""PostgreSQL restores are refused without touching the target schema: one with data and
no --force, a wrong root key, the dump's schema beside the target, a damaged dump, a broken
audit chain found after the dump was staged (the old schema is put back); with --force the
schema is replaced."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest
from tests.conftest import POSTGRES_URL, _require_postgres
from tests.integration.backup_tools import FLOW, NOW
from tests.pg_schemas import schema_url

from wovyr.engine.engine import Engine
from wovyr.errors import BackupRefused, Conflict, KmsError, WovyrError
from wovyr.platform.backup import restore_backup, take_backup, verify_backup
from wovyr.platform.kms import ROOT_ENV, RootKey, load_kms
from wovyr.platform.secrets import Secrets
from wovyr.store import open_store

pytestmark = [pytest.mark.postgres, pytest.mark.slow]


@dataclass
class Place:
    source: str  # the backed-up installation's URL (its schema is dropped: the "wipe")
    source_schema: str
    target: str  # a schema of the same database holding someone's table `keep`
    target_schema: str


@pytest.fixture
def place() -> Iterator[Place]:
    _require_postgres()
    tag = uuid.uuid4().hex[:10]
    source, target = f"src_{tag}", f"dst_{tag}"
    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {source}")
        conn.execute(f"CREATE SCHEMA {target}")
        conn.execute(f"CREATE TABLE {target}.keep (x int)")
        conn.execute(f"INSERT INTO {target}.keep VALUES (42)")
    try:
        yield Place(
            schema_url(POSTGRES_URL, source), source, schema_url(POSTGRES_URL, target), target
        )
    finally:
        with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
            for name in (source, target, f"{target}__pre_restore"):
                conn.execute(f"DROP SCHEMA IF EXISTS {name} CASCADE")


def _state(place: Place) -> dict[str, Any]:
    """The schemas of this test and what the target holds."""
    names = (place.source_schema, place.target_schema, f"{place.target_schema}__pre_restore")
    with psycopg.connect(POSTGRES_URL) as conn:
        found = [
            r[0]
            for r in conn.execute(
                "SELECT nspname FROM pg_namespace WHERE nspname = ANY(%s) ORDER BY 1",
                (list(names),),
            )
        ]
        tables = [
            r[0]
            for r in conn.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = %s "
                "ORDER BY 1",
                (place.target_schema,),
            )
        ]
        keep = None
        if "keep" in tables:
            keep = conn.execute(f"SELECT x FROM {place.target_schema}.keep").fetchall()
    return {"schemas": found, "tables": tables, "keep": keep}


def _installation(place: Place, home: Path, tamper: bool = False) -> tuple[Path, str]:
    """Back up a small installation in the source schema, then drop that schema."""
    store = open_store(place.source, db_clock=False)
    try:
        engine = Engine(store).acting("local:test")
        engine.apply(FLOW)
        engine.start(name="flow", execution_id="e1")
        kms = load_kms(home, {}, warn=False)
        Secrets(store, kms).set_secret(
            "default", "TOKEN", "token-value", by="t", at=NOW, actor="local:t"
        )
        if tamper:  # an edited audit record, found only once the dump is restored
            with psycopg.connect(place.source, autocommit=True) as conn:
                conn.execute("UPDATE audit_log SET actor = 'local:mallory' WHERE seq = 1")
        take_backup(store, home, home.parent / "bk", kms=kms, at=NOW)
    finally:
        store.close()
    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA {place.source_schema} CASCADE")
    return home.parent / "bk", kms.root.key.hex()


def _restore(src: Path, url: str, home: Path, key: str, force: bool = False) -> None:
    restore_backup(src, url, home, actor="local:t", at=NOW, env={ROOT_ENV: key}, force=force)


def _refused(
    src: Path,
    place: Place,
    home: Path,
    key: str,
    error: type[WovyrError],
    words: str,
    force: bool,
) -> None:
    before = _state(place)
    with pytest.raises(error, match=words):
        _restore(src, place.target, home, key, force)
    assert _state(place) == before
    assert before["keep"] == [(42,)]


def test_refusals_leave_the_target_schema_untouched(place: Place, tmp_path: Path) -> None:
    src, key = _installation(place, tmp_path / "home")
    home = tmp_path / "target-home"
    assert verify_backup(src, env={}).decrypted
    _refused(src, place, home, key, Conflict, "is not empty", force=False)
    wrong = RootKey.generate().key.hex()
    _refused(src, place, home, wrong, KmsError, "not the one", force=True)
    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:  # the source is still there
        conn.execute(f"CREATE SCHEMA {place.source_schema}")
    _refused(src, place, home, key, Conflict, "exists in the target database", force=True)
    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA {place.source_schema}")
    dump = src / "store.pgdump"
    data = bytearray(dump.read_bytes())
    data[len(data) // 2] ^= 0x01
    dump.write_bytes(bytes(data))
    _refused(src, place, home, key, BackupRefused, "does not match its SHA-256", force=True)
    assert not home.exists()


def test_a_broken_chain_found_after_staging_puts_the_old_schema_back(
    place: Place, tmp_path: Path
) -> None:
    src, key = _installation(place, tmp_path / "home", tamper=True)
    words = "audit chain in the backup is broken at seq 1"
    _refused(src, place, tmp_path / "t", key, BackupRefused, words, force=True)


def test_force_replaces_the_schema(place: Place, tmp_path: Path) -> None:
    src, key = _installation(place, tmp_path / "home")
    _restore(src, place.target, tmp_path / "h", key, force=True)
    after = _state(place)
    assert after["schemas"] == [place.target_schema]  # the old one dropped, no source
    assert after["keep"] is None and "executions" in after["tables"]
    store = open_store(place.target, db_clock=False)
    try:
        assert Engine(store).query("e1").status in ("running", "completed")
        kms = load_kms(tmp_path / "h", {ROOT_ENV: key}, warn=False)
        assert Secrets(store, kms).resolve_secret("default", "TOKEN") == "token-value"
        head = store.audit_head()
        assert head is not None and head.action == "backup.restore"
    finally:
        store.close()


def test_verify_checks_a_dumps_audit_chain_in_a_scratch_database(
    place: Place, tmp_path: Path
) -> None:
    """`verify` with a PostgreSQL server restores the dump into a scratch database (dropped
    after) and verifies its audit chain up to the recorded head: a sound one passes, an
    edited record is refused; nothing of the server's other schemas is touched."""
    src, key = _installation(place, tmp_path / "home")
    before = _state(place)
    report = verify_backup(src, env={ROOT_ENV: key}, server=POSTGRES_URL)
    # definition.apply, execution.start, secret.set
    assert report.audit.checked and report.audit.records == 3
    assert report.audit.anchors_verified is not None
    assert _state(place) == before

    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {place.source_schema}")
    bad, key = _installation(place, tmp_path / "second" / "home", tamper=True)
    with pytest.raises(BackupRefused, match="broken at seq 1"):
        verify_backup(bad, env={ROOT_ENV: key}, server=POSTGRES_URL)
    with psycopg.connect(POSTGRES_URL) as conn:  # every scratch database it made was dropped
        left = conn.execute(  # this process's (another run may share the server)
            "SELECT count(*) FROM pg_database WHERE datname LIKE %s",
            (f"wovyr_verify_{os.getpid()}_%",),
        ).fetchone()
    assert left == (0,)


def test_force_never_replaces_a_schema_a_worker_holds(place: Place, tmp_path: Path) -> None:
    """A worker (every server runs one) reports into the target schema's worker_members:
    while it is live, --force is refused and the schema stays as it is."""
    from wovyr.store.shards import Peer

    src, key = _installation(place, tmp_path / "home")
    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        conn.execute(f"DROP TABLE {place.target_schema}.keep")
    running = open_store(place.target)  # the target's own installation, migrated
    try:
        running.worker_heartbeat(Peer("worker-on-target", "all"), datetime.now(UTC), 30.0)  # type: ignore[attr-defined]
        before = _state(place)
        with pytest.raises(Conflict, match="in use: 1 worker"):
            _restore(src, place.target, tmp_path / "h", key, force=True)
        assert _state(place) == before
        running.member_leave("worker-on-target")  # type: ignore[attr-defined]
    finally:
        running.close()
    _restore(src, place.target, tmp_path / "h", key, force=True)


@pytest.fixture
def public_database() -> Iterator[str]:
    """A database of its own whose store lives in the default `public` schema (dropped
    after), as a store set up with a plain `postgresql://.../db` URL does."""
    _require_postgres()
    name = f"wovyr_pub_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    try:
        yield POSTGRES_URL.rsplit("/", 1)[0] + f"/{name}"
    finally:
        with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def test_verify_and_restore_a_store_of_the_public_schema(
    public_database: str, tmp_path: Path
) -> None:
    """A store in the default `public` schema (every new database has one) verifies in a
    scratch database and restores into another database's `public` schema: the dump's
    `CREATE SCHEMA public` meets the schema a new database already has."""
    home = tmp_path / "home"
    store = open_store(public_database, db_clock=False)
    try:
        engine = Engine(store).acting("local:test")
        engine.apply(FLOW)
        engine.start(name="flow", execution_id="e1")
        kms = load_kms(home, {}, warn=False)
        take_backup(store, home, tmp_path / "bk", kms=kms, at=NOW)
    finally:
        store.close()
    key = kms.root.key.hex()
    report = verify_backup(tmp_path / "bk", env={ROOT_ENV: key}, server=POSTGRES_URL)
    assert report.audit.checked and report.audit.records == 2  # apply, start
    with psycopg.connect(public_database, autocommit=True) as conn:  # a wiped installation
        conn.execute("DROP SCHEMA public CASCADE")
        conn.execute("CREATE SCHEMA public")
    _restore(tmp_path / "bk", public_database, tmp_path / "restored-home", key)
    restored = open_store(public_database, db_clock=False)
    try:
        assert Engine(restored).query("e1").status in ("running", "completed")
    finally:
        restored.close()
