"""API keys, idempotency keys and revoked UI sessions on every store."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from wovyr.store.base import Store
from wovyr.store.platform import ApiKeyRecord, IdempotencyRecord

T0 = datetime(2030, 1, 1, 9, 0, tzinfo=UTC)


def _key(key_id: str, tenant: str, at: datetime) -> ApiKeyRecord:
    return ApiKeyRecord(key_id, tenant, "admin", key_id, "wv_" + key_id, "h-" + key_id, at)


def test_the_first_key_only_once_and_keys_by_tenant(store: Store) -> None:
    assert store.create_api_key(_key("k1", "t1", T0), only_if_none=True)
    assert not store.create_api_key(_key("k2", "t1", T0), only_if_none=True)
    assert not store.create_api_key(_key("k1", "t2", T0))  # the id is taken
    assert store.create_api_key(_key("k3", "t2", T0 + timedelta(seconds=1)))
    assert [k.id for k in store.list_api_keys()] == ["k1", "k3"]
    assert [k.id for k in store.list_api_keys("t2")] == ["k3"]
    assert store.revoke_api_key("k1", T0 + timedelta(minutes=1))
    assert store.revoke_api_key("k1", T0 + timedelta(minutes=2))  # the first time stays
    revoked = store.get_api_key("k1")
    assert revoked is not None and revoked.revoked_at == T0 + timedelta(minutes=1)
    assert store.api_key_by_hash("h-k3") == _key("k3", "t2", T0 + timedelta(seconds=1))


def test_an_idempotency_key_is_claimed_once(store: Store) -> None:
    first = IdempotencyRecord("t1", "k", "f1", "e1", T0)
    assert store.claim_idempotency_key(first) == first
    assert store.claim_idempotency_key(IdempotencyRecord("t1", "k", "f2", "e2", T0)) == first
    other = IdempotencyRecord("t2", "k", "f2", "e2", T0)
    assert store.claim_idempotency_key(other) == other
    assert store.purge_idempotency_keys(T0 + timedelta(seconds=1)) == 2


def test_a_revoked_session_keeps_its_later_end(store: Store) -> None:
    store.revoke_session("s1", T0 + timedelta(hours=2))
    store.revoke_session("s1", T0 + timedelta(hours=1))
    assert store.session_revoked("s1") and not store.session_revoked("s2")
    assert store.purge_revoked_sessions(T0 + timedelta(hours=1, minutes=30)) == 0
    assert store.purge_revoked_sessions(T0 + timedelta(hours=3)) == 1
    assert not store.session_revoked("s1")
