"""Crypto-shredding holds against the store's own files: after `wovyr admin tenants shred`,
no byte of the SQLite database, its WAL or its -shm, with every root key the store was
ever wrapped by, opens the shredded tenant's data key (and so none of its secrets or sealed
payloads). The attack: scan the raw bytes of every file for every wrapped-key candidate
(a format byte, a nonce, the ciphertext and its tag) and try to unwrap each one as the
tenant's key; and look for any copy of a nonce the tenant's key was wrapped with, however
short the rest (with the root key, AES-GCM's keystream opens a partial ciphertext).

Before the shred scrubbed the store, the WAL kept every page as each transaction wrote it
(the key's row among them) until a checkpoint, and a SQLite built without SECURE_DELETE
left the old row in the page's free space. PostgreSQL keeps earlier row versions in its
write-ahead log whatever a vacuum does: there the shred says so, and the rotation of the
root key it points to leaves no copy that the remaining key opens.
"""

from __future__ import annotations

import os
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest

from wovyr.cli.main import main
from wovyr.errors import KmsError
from wovyr.platform.kms import NEW_ROOT_ENV, ROOT_ENV, Kms, RootKey, rotate
from wovyr.platform.secrets import Secrets, shred_tenant
from wovyr.store.base import Store
from wovyr.store.secrets import DataKeyRecord
from wovyr.store.sqlite import SQLiteStore

AT = datetime(2030, 1, 1, 9, tzinfo=UTC)
OLD = RootKey(bytes.fromhex("a1" * 32), ROOT_ENV)
NEW = RootKey(bytes.fromhex("b2" * 32), NEW_ROOT_ENV)
VICTIM = "victim"
OTHERS = [f"t{i:03d}" for i in range(120)]  # enough rows for the table to span pages
WRAPPED_BYTES = 1 + 12 + 32 + 16  # format, nonce, ciphertext of the data key, tag


def opening_candidates(data: bytes, versions: list[int], keys: list[RootKey]) -> int:
    """How many windows of `data` unwrap as a data key of VICTIM (any of `versions`) under
    any of `keys`: every offset holding the format byte is tried."""
    kms = {key.key_id: Kms(key, "production") for key in keys}
    found, start = 0, data.find(b"\x01")
    while 0 <= start <= len(data) - WRAPPED_BYTES:
        blob = data[start : start + WRAPPED_BYTES]
        for key_id, one in kms.items():
            for version in versions:
                try:
                    one.unwrap(DataKeyRecord(VICTIM, version, blob, key_id, AT))
                except KmsError:
                    continue
                found += 1
        start = data.find(b"\x01", start + 1)
    return found


def store_files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


def victim_blobs(store: Store) -> list[bytes]:
    return [k.wrapped for k in store.list_data_keys() if k.tenant == VICTIM and k.wrapped]


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("WOVYR_HOME", str(tmp_path))
    monkeypatch.setenv(ROOT_ENV, OLD.key.hex())
    monkeypatch.delenv(NEW_ROOT_ENV, raising=False)
    monkeypatch.delenv("WOVYR_DATABASE_URL", raising=False)
    return tmp_path


def fill(store: Store) -> tuple[Secrets, list[bytes]]:
    """Secrets of many tenants and the victim under OLD, a rotation onto NEW (so the
    victim's key was wrapped twice), more writes after it. Returns the secrets (under NEW)
    and every wrapping the victim's key ever had."""
    secrets = Secrets(store, Kms(OLD, "production"))
    for tenant in [*OTHERS[:60], VICTIM, *OTHERS[60:]]:
        secrets.set_secret(tenant, "TOKEN", f"value of {tenant}", by="t", at=AT)
    seen = victim_blobs(store)
    rotate(Kms(OLD, "production"), store, NEW, at=AT)
    seen += victim_blobs(store)
    secrets = Secrets(store, Kms(NEW, "production"))
    secrets.set_secret(VICTIM, "OTHER", "victim's second", by="t", at=AT)
    for tenant in OTHERS[::7]:
        secrets.set_secret(tenant, "MORE", "x" * 200, by="t", at=AT)
    return secrets, seen


def assert_erased(folder: Path, seen: list[bytes]) -> None:
    files = store_files(folder)
    assert {"wovyr.db", "wovyr.db-wal", "wovyr.db-shm"} <= set(files), sorted(files)
    for name, data in files.items():
        assert opening_candidates(data, [1], [OLD, NEW]) == 0, name
        for blob in seen:  # not even the nonce of a wrapping survives anywhere
            assert blob[1:13] not in data, name


def test_after_the_shred_command_no_store_file_opens_the_tenants_key(
    home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    store = SQLiteStore(home / "wovyr.db")
    try:
        secrets, seen = fill(store)
        assert len(seen) == 2
        # The scan finds the key while it exists (else it would prove nothing).
        before = store_files(home)
        assert sum(opening_candidates(d, [1], [OLD, NEW]) for d in before.values()) >= 2

        monkeypatch.setenv(ROOT_ENV, NEW.key.hex())
        assert main(["admin", "tenants", "shred", VICTIM, "--yes"]) == 0
        assert "the store's files keep no earlier copy of them" in capsys.readouterr().out

        assert_erased(home, seen)
        with pytest.raises(KmsError, match="was shredded"):
            secrets.resolve_secret(VICTIM, "TOKEN")
        for tenant in OTHERS[::17]:  # every other tenant still opens
            assert secrets.resolve_secret(tenant, "TOKEN") == f"value of {tenant}"
    finally:
        store.close()


def test_the_shred_zeroes_freed_space_on_a_sqlite_built_without_secure_delete(
    home: Path,
) -> None:
    """Some builds zero freed space by default (SQLITE_SECURE_DELETE), others do not: with
    the pragma off, the shredded row's old bytes stayed in its page's free space (the
    nonce of the last wrapping was still in the database file after a checkpoint)."""
    store = SQLiteStore(home / "wovyr.db")
    try:
        store._writer.execute("PRAGMA secure_delete = OFF")  # as such a build does
        _, seen = fill(store)
        assert shred_tenant(store, VICTIM, by="t", at=AT).remains == ()
        assert_erased(home, seen)
        assert store._writer.execute("PRAGMA secure_delete").fetchone()[0] == 0  # restored
    finally:
        store.close()


def test_a_reader_that_keeps_the_wal_is_reported_and_the_next_shred_finishes(home: Path) -> None:
    store = SQLiteStore(home / "wovyr.db", busy_timeout_ms=200)
    reader = sqlite3.connect(home / "wovyr.db", isolation_level=None)
    try:
        _, seen = fill(store)
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM data_keys").fetchone()  # holds its snapshot
        report = shred_tenant(store, VICTIM, by="t", at=AT)
        assert report.destroyed == 1
        assert len(report.remains) == 1
        assert "could not be emptied" in report.remains[0], report.remains
        assert any(blob in (home / "wovyr.db-wal").read_bytes() for blob in seen)
        reader.execute("COMMIT")
        again = shred_tenant(store, VICTIM, by="t", at=AT)
        assert (again.destroyed, again.remains) == (0, ())
        assert_erased(home, seen)
    finally:
        reader.close()
        store.close()


# --- PostgreSQL ----------------------------------------------------------------------------


@pytest.fixture
def pg_data(postgres_url: str) -> Path:
    """The server's data directory, when this process may read it (a local server)."""
    import psycopg

    with psycopg.connect(postgres_url, autocommit=True) as conn:
        row = conn.execute("SHOW data_directory").fetchone()
    folder = Path(str(row[0])) if row else None
    if folder is None or not os.access(folder / "pg_wal", os.R_OK | os.X_OK):
        pytest.skip("the PostgreSQL server's data directory is not readable here")
    return folder


def pg_copies(url: str, folder: Path, blobs: list[bytes]) -> list[tuple[str, bytes]]:
    """(file, blob) for every one of `blobs` found in the data_keys table's file or a WAL
    segment of the server."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT pg_relation_filepath('data_keys')").fetchone()
    assert row is not None
    files = [folder / str(row[0]), *sorted((folder / "pg_wal").glob("0*"))]
    found = []
    for path in files:
        data = path.read_bytes()
        found += [(path.name, blob) for blob in blobs if blob in data]
    return found


@pytest.mark.postgres
def test_on_postgres_the_shred_names_the_wal_and_a_rotation_makes_it_final(
    postgres_url: str, pg_data: Path
) -> None:
    from wovyr.store.postgres import PostgresStore

    store = PostgresStore(postgres_url, max_size=2)
    try:
        secrets = Secrets(store, Kms(OLD, "production"))
        for tenant in (VICTIM, *OTHERS[:5]):
            secrets.set_secret(tenant, "TOKEN", f"value of {tenant}", by="t", at=AT)
        seen = victim_blobs(store)
        report = shred_tenant(store, VICTIM, by="t", at=AT)
        assert report.destroyed == 1
        assert len(report.remains) == 1 and "write-ahead log" in report.remains[0]
        assert "wovyr admin kms rotate" in report.remains[0]
        # What the shred leaves: the row as it was, in the WAL, and the root key opens it.
        copies = pg_copies(postgres_url, pg_data, seen)
        assert any(name != "data_keys" for name, _ in copies), copies
        kms = Kms(OLD, "production")
        for _, blob in copies:
            assert len(kms.unwrap(DataKeyRecord(VICTIM, 1, blob, OLD.key_id, AT))) == 32
        # A rotation re-wraps every other key under NEW and never the shredded one: with
        # OLD retired, no copy anywhere opens with the key that remains.
        rotate(kms, store, NEW, at=AT)
        remaining = Kms(NEW, "production")
        for _, blob in pg_copies(postgres_url, pg_data, seen):
            with pytest.raises(KmsError):
                remaining.unwrap(DataKeyRecord(VICTIM, 1, blob, NEW.key_id, AT))
        assert Secrets(store, remaining).resolve_secret(OTHERS[0], "TOKEN") == "value of t000"
    finally:
        store.close()
