"""Tampering with the audit chain in the database is caught by `wovyr admin audit verify`,
which exits 1 naming the first bad seq and why: an edited record, a deleted one, two
swapped, a truncated tail (through the latest anchor) and a full rewrite with recomputed
hashes (through the anchors' HMACs). The attacker here writes to the SQLite file (or the
PostgreSQL schema) directly, as someone holding the database but not the root key would.

The anchor key comes from a KMS data key (`audit_anchor_key`): anchors signed before
`wovyr admin kms rotate` still verify after it, tampering is still caught after it, and
shredding a tenant leaves them verifiable.
"""

from __future__ import annotations

import io
import json
import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from wovyr.cli.main import main
from wovyr.errors import KmsError
from wovyr.platform.audit import verify_chain, write_anchor
from wovyr.platform.kms import NEW_ROOT_ENV, ROOT_ENV, Kms, RootKey
from wovyr.platform.secrets import AUDIT_ANCHOR_OWNER, Secrets, audit_anchor_key, shred_tenant
from wovyr.store.audit import AuditEntry, AuditRecord, chain_hash
from wovyr.store.base import Store
from wovyr.store.postgres import PostgresStore
from wovyr.store.sqlite import SQLiteStore

ROOT = "ab" * 32
NEW_ROOT = "ef" * 32
AT = datetime(2030, 1, 1, 9, tzinfo=UTC)
COLUMNS = ("at", "tenant", "actor", "action", "target", "details", "prev_hash", "hash")


def anchor_key(store: Store, root: str = ROOT) -> bytes:
    kms = Kms(RootKey(bytes.fromhex(root), ROOT_ENV), "production")
    return audit_anchor_key(Secrets(store, kms), AT, store)


def fill(store: Store) -> None:
    """Seven records, anchored at seq 3 and at seq 6 (the head when the last anchor was
    signed), then one more record after it."""
    for i in range(1, 8):
        at = AT + timedelta(seconds=i)
        store.append_audit(AuditEntry(at, "t1", "local:alice", "execution.start", f"e{i}", {}))
        if i in (3, 6):
            write_anchor(store, anchor_key(store), at)


class Raw:
    """The attacker's direct connection to the database."""

    def __init__(self, store: Store) -> None:
        self.store = store
        if isinstance(store, SQLiteStore):
            self.conn: Any = sqlite3.connect(store.path, isolation_level=None)
            self.mark = "?"
        else:
            import psycopg

            assert isinstance(store, PostgresStore)
            self.conn = psycopg.connect(store.url, autocommit=True)
            self.mark = "%s"

    def run(self, sql: str, *params: Any) -> None:
        self.conn.execute(sql.replace("?", self.mark), params)

    def row(self, seq: int) -> tuple[Any, ...]:
        cur = self.conn.execute(
            f"SELECT {', '.join(COLUMNS)} FROM audit_log WHERE seq = {self.mark}", (seq,)
        )
        found = cur.fetchone()
        assert found is not None
        return tuple(found)

    def put(self, seq: int, values: tuple[Any, ...]) -> None:
        sets = ", ".join(f"{c} = ?" for c in COLUMNS)
        if isinstance(self.store, PostgresStore):  # details is jsonb there
            sets = sets.replace("details = ?", "details = ?::jsonb")
            values = tuple(
                json.dumps(v) if c == "details" else v for c, v in zip(COLUMNS, values, strict=True)
            )
        self.run(f"UPDATE audit_log SET {sets} WHERE seq = ?", *values, seq)

    def rewrite(self, records: list[AuditRecord]) -> None:
        """Change record 2 and recompute every hash after it, links included."""
        prev = records[0].hash
        for r in records[1:]:
            target = "forged" if r.seq == 2 else r.target
            digest = chain_hash(r.seq, r.at, r.tenant, r.actor, r.action, target, r.details, prev)
            self.run(
                "UPDATE audit_log SET target = ?, prev_hash = ?, hash = ? WHERE seq = ?",
                target,
                prev,
                digest,
                r.seq,
            )
            prev = digest

    def close(self) -> None:
        self.conn.close()


def edit(raw: Raw) -> None:
    raw.run("UPDATE audit_log SET actor = 'local:mallory' WHERE seq = 4")


def delete(raw: Raw) -> None:
    raw.run("DELETE FROM audit_log WHERE seq = 4")


def swap(raw: Raw) -> None:
    four, five = raw.row(4), raw.row(5)
    raw.put(4, five)
    raw.put(5, four)


def truncate(raw: Raw) -> None:
    raw.run("DELETE FROM audit_log WHERE seq >= 5")


def rewrite(raw: Raw) -> None:
    raw.rewrite(raw.store.audit_records())


def rewrite_and_forge_anchors(raw: Raw) -> None:
    rewrite(raw)
    for r in raw.store.audit_records():  # the anchors now name the new hashes...
        raw.run("UPDATE audit_anchors SET hash = ? WHERE seq = ?", r.hash, r.seq)
    # ...but their HMACs cannot be recomputed without the key


TAMPERING: dict[str, tuple[Callable[[Raw], None], int, str]] = {
    "edit": (edit, 4, "does not match its contents"),
    "delete": (delete, 4, "record 4 is missing (deleted)"),
    "swap": (swap, 4, "does not match its contents"),
    "truncate": (truncate, 5, "records 5..6 were removed (truncated)"),
    "rewrite": (rewrite, 3, "the chain was rewritten"),
    "forged-anchors": (rewrite_and_forge_anchors, 3, "bad signature"),
}


@pytest.fixture
def sqlite_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[SQLiteStore]:
    monkeypatch.setenv("WOVYR_HOME", str(tmp_path))
    monkeypatch.setenv(ROOT_ENV, ROOT)
    monkeypatch.delenv(NEW_ROOT_ENV, raising=False)
    monkeypatch.delenv("WOVYR_DATABASE_URL", raising=False)
    store = SQLiteStore(tmp_path / "wovyr.db")
    fill(store)
    yield store
    store.close()


def verify(capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any]]:
    code = main(["admin", "audit", "verify", "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_an_untouched_chain_verifies(
    sqlite_home: SQLiteStore, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = verify(capsys)
    assert code == 0, out
    assert out["ok"] and out["records"] == 7 and out["anchors"] == 2 and out["anchors_verified"]
    assert main(["admin", "audit", "verify"]) == 0
    assert (
        "audit chain OK: 7 record(s), head seq 7, 2 anchor(s) verified" in capsys.readouterr().out
    )


@pytest.mark.parametrize("name", list(TAMPERING))
def test_tampering_is_detected_with_the_first_bad_seq(
    name: str, sqlite_home: SQLiteStore, capsys: pytest.CaptureFixture[str]
) -> None:
    tamper, seq, reason = TAMPERING[name]
    raw = Raw(sqlite_home)
    try:
        tamper(raw)
    finally:
        raw.close()
    code, out = verify(capsys)
    assert code == 1
    assert out["problems"][0]["seq"] == seq, out
    assert reason in out["problems"][0]["reason"], out
    assert main(["admin", "audit", "verify"]) == 1
    assert f"audit chain BROKEN at seq {seq}: " in capsys.readouterr().out


def test_without_the_root_key_anchors_cannot_be_checked_and_verify_fails(
    sqlite_home: SQLiteStore,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.delenv(ROOT_ENV)  # no key at all: verify must not make a development one
    raw = Raw(sqlite_home)
    try:
        rewrite_and_forge_anchors(raw)  # undetectable without the key...
    finally:
        raw.close()
    assert main(["admin", "audit", "verify"]) == 1  # ...so the anchors prove nothing: no ok
    captured = capsys.readouterr()
    assert "audit chain BROKEN at seq 3: 2 anchor(s) cannot be checked" in captured.out
    assert "anchors not checked: the anchor key cannot be read (no root key" in captured.err
    assert not (tmp_path / "kms-root.key").exists()  # verify never makes a key
    # ...and anchoring refuses to run without it
    assert main(["admin", "audit", "anchor"]) == 1
    assert "is wrapped by root key" in capsys.readouterr().err


def test_a_chain_without_anchors_verifies_its_links_without_a_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("WOVYR_HOME", str(tmp_path))
    monkeypatch.delenv(ROOT_ENV, raising=False)
    monkeypatch.delenv("WOVYR_DATABASE_URL", raising=False)
    store = SQLiteStore(tmp_path / "wovyr.db")
    try:
        store.append_audit(AuditEntry(AT, "t1", "local:alice", "execution.start", "e1", {}))
    finally:
        store.close()
    assert main(["admin", "audit", "verify"]) == 0
    captured = capsys.readouterr()
    assert "audit chain OK: 1 record(s), head seq 1, 0 anchor(s)" in captured.out
    assert "this store has no anchor key yet" in captured.err
    assert not (tmp_path / "kms-root.key").exists()


def test_a_bad_root_key_is_a_clear_error(
    sqlite_home: SQLiteStore, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(ROOT_ENV, "abcd")
    assert main(["admin", "audit", "verify"]) == 1  # the links hold; the anchors: unchecked
    err = capsys.readouterr().err
    assert "the anchor key cannot be read (WOVYR_KMS_ROOT_KEY holds 2 bytes" in err
    assert "abcd" not in err
    monkeypatch.setenv(ROOT_ENV, "zz" * 32)
    assert main(["admin", "audit", "anchor"]) == 1
    assert "WOVYR_KMS_ROOT_KEY is not a hex string" in capsys.readouterr().err


def _anchor_row_count(store: SQLiteStore) -> int:
    return sum(1 for k in store.list_data_keys() if k.tenant == AUDIT_ANCHOR_OWNER)


#: What someone holding only the database file can do to the row of the anchor key.
ANCHOR_KEY_ROW = {
    "altered": "UPDATE data_keys SET wrapped = randomblob(length(wrapped)) WHERE tenant = ?",
    "deleted": "DELETE FROM data_keys WHERE tenant = ?",
    "tombstoned": "UPDATE data_keys SET wrapped = x'', root_id = 'shredded' WHERE tenant = ?",
    "foreign": "UPDATE data_keys SET root_id = '0123456789abcdef' WHERE tenant = ?",
}


@pytest.mark.parametrize("change", list(ANCHOR_KEY_ROW))
def test_a_rewrite_after_changing_the_anchor_keys_row_fails_verify(
    change: str,
    sqlite_home: SQLiteStore,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The attack: with the database file alone (sqlite3, no Wovyr code), change the row of
    the anchor key so that the key cannot be read, rewrite the chain and forge the anchors'
    hashes. verify answered ok (exit 0) when the key did not load; it exits 1, and makes no
    key (a new one would make the forged anchors' failure look like a rotation)."""
    conn = sqlite3.connect(sqlite_home.path, isolation_level=None)
    try:
        conn.execute(ANCHOR_KEY_ROW[change], (AUDIT_ANCHOR_OWNER,))
    finally:
        conn.close()
    raw = Raw(sqlite_home)
    try:
        rewrite_and_forge_anchors(raw)
    finally:
        raw.close()
    rows = _anchor_row_count(sqlite_home)
    code, out = verify(capsys)
    assert code == 1, out
    assert not out["ok"] and not out["anchors_verified"]
    assert out["problems"][0]["seq"] == 3
    assert "cannot be checked without the anchor key" in out["problems"][0]["reason"]
    assert out["note"].startswith("anchors not checked: ")
    assert _anchor_row_count(sqlite_home) == rows  # verify made no key
    assert not (tmp_path / "kms-root.key").exists()
    # Signing refuses too: a new key would hide the removed one.
    assert main(["admin", "audit", "anchor"]) == 1
    assert _anchor_row_count(sqlite_home) == rows
    err = capsys.readouterr().err
    wanted = {
        "altered": "does not open",
        "deleted": "the key that signed them is gone",
        "tombstoned": "marked shredded, which Wovyr never does",
        "foreign": "is wrapped by root key 0123456789abcdef",
    }[change]
    assert wanted in err, err


def rotate_root_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """`wovyr admin kms rotate` from ROOT to NEW_ROOT; then every process has NEW_ROOT."""
    monkeypatch.setenv(NEW_ROOT_ENV, NEW_ROOT)
    assert main(["admin", "kms", "rotate"]) == 0
    monkeypatch.setenv(ROOT_ENV, NEW_ROOT)
    monkeypatch.delenv(NEW_ROOT_ENV)


def test_anchors_signed_before_a_rotation_verify_after_it(
    sqlite_home: SQLiteStore, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    before = anchor_key(sqlite_home)
    rotate_root_key(monkeypatch)
    assert anchor_key(sqlite_home, NEW_ROOT) == before  # the same key, re-wrapped
    with pytest.raises(KmsError):  # the old root key no longer opens it
        anchor_key(sqlite_home, ROOT)
    capsys.readouterr()
    code, out = verify(capsys)
    assert code == 0 and out["ok"] and out["anchors"] == 2 and out["anchors_verified"], out
    assert main(["admin", "audit", "anchor"]) == 0  # signs the kms.rotate record, same key
    capsys.readouterr()
    code, out = verify(capsys)
    assert code == 0 and out["anchors"] == 3 and out["anchors_verified"], out


@pytest.mark.parametrize("name", list(TAMPERING))
def test_tampering_is_still_detected_after_a_rotation(
    name: str,
    sqlite_home: SQLiteStore,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    rotate_root_key(monkeypatch)
    tamper, seq, reason = TAMPERING[name]
    raw = Raw(sqlite_home)
    try:
        tamper(raw)
    finally:
        raw.close()
    capsys.readouterr()
    code, out = verify(capsys)
    assert code == 1 and out["anchors_verified"]
    assert out["problems"][0]["seq"] == seq, out
    assert reason in out["problems"][0]["reason"], out


def test_shredding_a_tenant_leaves_anchors_verifiable(
    sqlite_home: SQLiteStore, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"value-of-a")))
    assert main(["secrets", "set", "A", "--tenant", "t1"]) == 0
    assert main(["admin", "tenants", "shred", "t1", "--yes"]) == 0
    with pytest.raises(ValueError, match="never shredded"):
        shred_tenant(sqlite_home, AUDIT_ANCHOR_OWNER, by="test", at=AT)
    capsys.readouterr()
    code, out = verify(capsys)
    assert code == 0 and out["ok"] and out["anchors"] == 2 and out["anchors_verified"], out
    assert out["records"] == 9  # the secret's set and the shred


@pytest.mark.postgres
@pytest.mark.parametrize("name", list(TAMPERING))
def test_tampering_is_detected_on_postgres(name: str, postgres_url: str) -> None:
    store = PostgresStore(postgres_url, max_size=2)
    try:
        fill(store)
        assert verify_chain(store, anchor_key(store)).ok
        tamper, seq, reason = TAMPERING[name]
        raw = Raw(store)
        try:
            tamper(raw)
        finally:
            raw.close()
        verdict = verify_chain(store, anchor_key(store))
        assert verdict.first is not None
        assert verdict.first[0] == seq and reason in verdict.first[1], verdict.problems
    finally:
        store.close()


def test_a_moved_record_time_is_an_edit(sqlite_home: SQLiteStore) -> None:
    first = sqlite_home.audit_records()[0]
    later = replace(first, at=first.at + timedelta(microseconds=1))
    assert later.expected_hash() != first.hash  # the time is covered to the microsecond
