"""API keys and idempotency records on every store: hashed only, constant-time compare,
revocable, one bootstrap key even under a race; the `Authenticator` seam."""

from __future__ import annotations

import threading
from datetime import timedelta
from pathlib import Path

import pytest

from wovyr.clock import ManualClock
from wovyr.errors import InputError, NotFound
from wovyr.platform.auth import (
    CACHE_TTL,
    ROLES,
    Authenticator,
    Principal,
    PrincipalCache,
    hash_token,
    role_at_least,
)
from wovyr.store.base import Store
from wovyr.store.platform import IdempotencyRecord


@pytest.fixture
def auth(store: Store, clock: ManualClock) -> Authenticator:
    return Authenticator(store, clock)


def test_create_verify_revoke(auth: Authenticator, clock: ManualClock) -> None:
    key_id, token = auth.create_key("acme", "operator", "ci")
    assert token.startswith("wvr_") and len(token) >= 40
    principal = auth.verify(token)
    assert principal == Principal("acme", "operator", key_id, "ci")
    assert principal.can("viewer") and principal.can("operator") and not principal.can("admin")
    assert auth.verify(token[:-1] + ("A" if token[-1] != "A" else "B")) is None
    assert auth.verify("") is None and auth.verify(None) is None
    assert auth.verify("Bearer " + token) is None
    assert auth.principal_for_key(key_id) == principal
    revoked = auth.revoke(key_id)
    assert revoked.revoked_at == clock.now()
    assert auth.verify(token) is None
    assert auth.principal_for_key(key_id) is None
    clock.advance(5)
    assert auth.revoke(key_id).revoked_at == revoked.revoked_at  # the first time is kept


def test_only_the_hash_is_stored(auth: Authenticator) -> None:
    _, token = auth.create_key("acme", "viewer", "")
    [record] = auth.list_keys("acme")
    assert record.key_hash == hash_token(token)
    assert record.prefix == token[:12]
    assert token not in repr(record)


def test_token_never_reaches_the_sqlite_file(tmp_path: Path, clock: ManualClock) -> None:
    from wovyr.store.sqlite import SQLiteStore

    store = SQLiteStore(tmp_path / "keys.db")
    _, token = Authenticator(store, clock).create_key("acme", "admin", "x")
    store.close()
    secret_part = token[12:].encode()
    for path in tmp_path.iterdir():
        assert secret_part not in path.read_bytes(), path


def test_listing_by_tenant_and_tenant_scoped_lookups(auth: Authenticator) -> None:
    a, _ = auth.create_key("acme", "viewer", "a")
    b, _ = auth.create_key("globex", "admin", "b")
    assert [k.id for k in auth.list_keys("acme")] == [a]
    assert {k.id for k in auth.list_keys()} == {a, b}
    with pytest.raises(NotFound):
        auth.get_key(b, tenant="acme")
    with pytest.raises(NotFound):
        auth.revoke(b, tenant="acme")
    assert auth.get_key(b).revoked_at is None


def test_bad_tenants_roles_names(auth: Authenticator) -> None:
    for tenant, role in (("", "viewer"), ("a b", "viewer"), ("x" * 65, "viewer"), ("ok", "root")):
        with pytest.raises(InputError):
            auth.create_key(tenant, role)
    with pytest.raises(InputError):
        auth.create_key("ok", "viewer", "n" * 201)


def test_last_used_is_recorded_without_a_write_per_request(
    auth: Authenticator, clock: ManualClock
) -> None:
    key_id, token = auth.create_key("acme", "viewer")
    auth.verify(token)
    first = auth.get_key(key_id).last_used_at
    assert first == clock.now()
    clock.advance(10)
    auth.verify(token)
    assert auth.get_key(key_id).last_used_at == first  # within a minute: no write
    clock.advance(60)
    auth.verify(token)
    assert auth.get_key(key_id).last_used_at == clock.now()


def test_a_verified_key_is_remembered_until_its_ttl(
    store: Store, auth: Authenticator, clock: ManualClock
) -> None:
    key_id, token = auth.create_key("acme", "operator")
    principal = auth.verify(token)
    assert auth.cached(token) == principal
    Authenticator(store, clock).revoke(key_id)  # another process: this one is not told
    assert auth.verify(token) == principal
    clock.advance(CACHE_TTL.total_seconds())
    assert auth.cached(token) is None and auth.verify(token) is None


def test_revoking_forgets_the_key_at_once(auth: Authenticator) -> None:
    key_id, token = auth.create_key("acme", "admin")
    _, other = auth.create_key("acme", "viewer")
    assert auth.verify(token) is not None and auth.verify(other) is not None
    auth.revoke(key_id)
    assert auth.cached(token) is None and auth.verify(token) is None
    assert auth.cached(other) is not None  # only the revoked key is forgotten


def test_a_key_read_before_a_revoke_is_not_remembered_after_it(clock: ManualClock) -> None:
    """A verify that read the key from the store, then a revoke, then the verify's `put`
    (threads interleaved): the stale principal is not kept."""
    cache = PrincipalCache(clock)
    principal = Principal("acme", "admin", "key_1")
    read_in = cache.generation
    cache.forget("key_1")
    cache.put("digest", principal, read_in)
    assert cache.get("digest") is None
    cache.put("digest", principal, cache.generation)
    assert cache.get("digest") == principal


def test_the_cache_is_bounded_and_never_mixes_keys(store: Store, clock: ManualClock) -> None:
    auth = Authenticator(store, clock, cache_size=3)
    keys = [auth.create_key(f"t{i}", ROLES[i % 3]) for i in range(5)]
    for _ in range(2):
        for i, (key_id, token) in enumerate(keys):
            assert auth.verify(token) == Principal(f"t{i}", ROLES[i % 3], key_id)
    assert len(auth.cache) == 3
    assert [auth.cached(t) is not None for _, t in keys] == [False, False, True, True, True]
    assert auth.verify("wvr_" + "x" * 43) is None
    assert len(auth.cache) == 3  # unknown tokens are not remembered


def test_bootstrap_creates_one_admin_key_once(auth: Authenticator) -> None:
    token = auth.bootstrap_admin_if_empty()
    assert token is not None
    principal = auth.verify(token)
    assert principal is not None and (principal.tenant, principal.role) == ("default", "admin")
    assert auth.bootstrap_admin_if_empty() is None
    assert len(auth.list_keys()) == 1


def test_bootstrap_race_creates_exactly_one_key(store: Store, clock: ManualClock) -> None:
    tokens: list[str | None] = []
    barrier = threading.Barrier(6)

    def boot() -> None:
        barrier.wait()
        tokens.append(Authenticator(store, clock).bootstrap_admin_if_empty())

    threads = [threading.Thread(target=boot) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len([t for t in tokens if t]) == 1
    assert len(Authenticator(store, clock).list_keys()) == 1


def test_no_bootstrap_when_a_key_exists(auth: Authenticator) -> None:
    auth.create_key("acme", "viewer")
    assert auth.bootstrap_admin_if_empty() is None


def test_roles_are_ordered() -> None:
    assert ROLES == ("viewer", "operator", "admin")
    assert role_at_least("admin", "viewer") and not role_at_least("viewer", "operator")
    assert not role_at_least("root", "viewer")


def test_idempotency_records_first_writer_wins(store: Store, clock: ManualClock) -> None:
    now = clock.now()
    first = IdempotencyRecord("acme", "k1", "f1", "exec-1", now)
    assert store.claim_idempotency_key(first) == first  # type: ignore[attr-defined]
    second = IdempotencyRecord("acme", "k1", "f2", "exec-2", now)
    assert store.claim_idempotency_key(second) == first  # type: ignore[attr-defined]
    other_tenant = IdempotencyRecord("globex", "k1", "f2", "exec-3", now)
    assert store.claim_idempotency_key(other_tenant) == other_tenant  # type: ignore[attr-defined]
    assert store.purge_idempotency_keys(now + timedelta(seconds=1)) == 2  # type: ignore[attr-defined]
    assert store.claim_idempotency_key(second) == second  # type: ignore[attr-defined]


def test_idempotency_claim_race_has_one_winner(store: Store, clock: ManualClock) -> None:
    results: list[IdempotencyRecord] = []
    barrier = threading.Barrier(6)

    def claim(n: int) -> None:
        barrier.wait()
        record = IdempotencyRecord("acme", "race", f"f{n}", f"exec-{n}", clock.now())
        results.append(store.claim_idempotency_key(record))  # type: ignore[attr-defined]

    threads = [threading.Thread(target=claim, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({r.execution_id for r in results}) == 1
