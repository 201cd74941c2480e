"""Artifacts on every store: bytes stored once per tenant by digest, the same bytes again
store nothing new (no second debit, no second audit record), another tenant's artifact
answers exactly like a missing one, lists page newest first, and a sealing tenant's bytes
are stored sealed (never in clear in the database file)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from tests.conftest import STORE_KINDS, make_store

from wovyr.engine.tenants import set_sealing
from wovyr.errors import QuotaExceeded
from wovyr.platform.kms import Kms, RootKey
from wovyr.platform.payloads import sealed_store
from wovyr.platform.secrets import Secrets
from wovyr.store.artifacts import NewArtifact, artifact_digest
from wovyr.store.audit import AuditEntry
from wovyr.store.base import Store
from wovyr.store.records import Debit
from wovyr.store.sealing import SealingStore

AT = datetime(2030, 1, 1, 9, tzinfo=UTC)
PNG = b"\x89PNG\r\n\x1a\n" + b"pixels" * 50


def new(data: bytes = PNG, tenant: str = "t1", at: datetime = AT, **kw: object) -> NewArtifact:
    digest = artifact_digest(data)
    return NewArtifact(tenant, digest, "image/png", len(data), data, at, "key:k1", **kw)  # type: ignore[arg-type]


def test_bytes_are_stored_once_and_read_back(store: Store) -> None:
    record, created = store.put_artifact(new())
    assert created and record.digest == artifact_digest(PNG) and record.size == len(PNG)
    assert (record.tenant, record.media_type, record.created_by) == ("t1", "image/png", "key:k1")
    assert record.created_at == AT
    again, created_again = store.put_artifact(new(at=AT + timedelta(hours=1)))
    assert not created_again and again == record  # the first put's row, nothing new
    found = store.read_artifact("t1", record.digest)
    assert found == (record, PNG)
    assert store.get_artifact("t1", record.digest) == record
    assert store.get_artifact("t1", artifact_digest(b"other")) is None
    assert store.read_artifact("t1", artifact_digest(b"other")) is None


def test_another_tenants_artifact_is_missing(store: Store) -> None:
    digest = store.put_artifact(new())[0].digest
    assert store.get_artifact("t2", digest) is None
    assert store.read_artifact("t2", digest) is None
    assert store.list_artifacts("t2") == []
    record, created = store.put_artifact(new(tenant="t2"))  # the same digest, its own row
    assert created and record.tenant == "t2"
    assert [r.tenant for r in store.list_artifacts("t1")] == ["t1"]


def test_the_first_put_debits_and_audits_the_same_bytes_again_do_not(store: Store) -> None:
    day = AT.date()
    debit = Debit("stored_bytes", len(PNG), day, 10_000)
    entry = AuditEntry(AT, "t1", "key:k1", "artifact.put", artifact_digest(PNG))
    head = store.audit_head()
    store.put_artifact(new(debits=(debit,)), audit=entry)
    store.put_artifact(new(debits=(debit,)), audit=entry)
    assert store.quota_usage("t1", day) == {"stored_bytes": len(PNG)}
    after = store.audit_head()
    assert after is not None and after.seq == (head.seq if head else 0) + 1


def test_a_put_the_quota_refuses_writes_nothing(store: Store) -> None:
    day = AT.date()
    with pytest.raises(QuotaExceeded):
        store.put_artifact(new(debits=(Debit("stored_bytes", len(PNG), day, 100),)))
    assert store.get_artifact("t1", artifact_digest(PNG)) is None
    assert store.quota_usage("t1", day) == {}


def test_lists_page_newest_first(store: Store) -> None:
    blobs = [PNG + bytes([i]) for i in range(5)]
    for i, data in enumerate(blobs):
        store.put_artifact(new(data, at=AT + timedelta(seconds=i // 2)))  # two share a time
    first = store.list_artifacts("t1", limit=3)
    assert len(first) == 3
    last = first[-1]
    rest = store.list_artifacts("t1", before=(last.created_at, last.digest), limit=3)
    listed = first + rest
    assert len(listed) == 5 and {r.digest for r in listed} == {artifact_digest(b) for b in blobs}
    keys = [(r.created_at, r.digest) for r in listed]
    assert keys == sorted(keys, reverse=True)


@pytest.fixture(params=STORE_KINDS)
def sealed(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SealingStore]:
    url = request.getfixturevalue("migrated_postgres_url") if request.param == "postgres" else None
    inner = make_store(request.param, tmp_path, url)
    store = sealed_store(inner, Secrets(inner, Kms(RootKey(b"\x11" * 32), "production")))
    set_sealing(store, "t1", True, by="test", at=AT)
    yield store
    inner.close()


def test_a_sealing_tenants_bytes_are_stored_sealed(sealed: SealingStore, tmp_path: Path) -> None:
    secret = b"\x89PNG\r\n\x1a\n" + b"a-very-recognisable-secret-image" * 20
    record, created = sealed.put_artifact(new(secret))
    assert created and record.size == len(secret)
    raw = sealed.inner.read_artifact("t1", record.digest)
    assert raw is not None and secret not in raw[1] and b"recognisable" not in raw[1]
    assert sealed.read_artifact("t1", record.digest) == (record, secret)
    # the same bytes put again are the same row (the digest is of the plain bytes)
    assert sealed.put_artifact(new(secret)) == (record, False)
    # a tenant that does not seal stores them as they are
    other = b"\x89PNG\r\n\x1a\n" + b"plain-for-t2" * 20
    plain, _ = sealed.put_artifact(replace(new(other), tenant="t2"))
    assert sealed.inner.read_artifact("t2", plain.digest) == (plain, other)
    database = tmp_path / "wovyr.db"
    if database.exists():  # SQLite: not in the file in clear (t2's bytes are)
        sealed.inner.close()
        held = b"".join(f.read_bytes() for f in tmp_path.glob("wovyr.db*"))
        assert b"recognisable" not in held and b"plain-for-t2" * 20 in held
