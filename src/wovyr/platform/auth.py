"""API keys: long random tokens, stored only as SHA-256 hashes, bound to a tenant and a role.

A token is ``wvr_`` + 32 random bytes (URL-safe base64): far too much entropy to guess, so
one unsalted SHA-256 is enough to keep a stolen key table useless. The store finds a key by
its hash, and the hash is compared again in constant time. Roles are ordered
``viewer < operator < admin``: a viewer reads; an operator also starts, signals, approves,
cancels and manages schedules; an admin also manages keys.

This is the seam the HTTP API and the web UI share: `Authenticator.verify(token)` turns a
bearer token into a `Principal`, or None; `principal_for_key(key_id)` re-checks a key a
session remembered (revoked keys stop working there too).

A server verifies the same few keys on every request, so an `Authenticator` remembers the
keys it verified (`PrincipalCache`: by the token's hash, never the token; at most
`CACHE_SIZE` keys, each for `CACHE_TTL` on the injected clock). A key revoked through the
authenticator that remembers it stops working at once: `revoke` forgets it. A key revoked
elsewhere (the host's `wovyr admin keys revoke`, another server over the same PostgreSQL)
stops working here within `CACHE_TTL`: a time bound rather than a counter read from the
store, because reading any store row per request is the cost the cache removes, and no
change of the key tables is needed for every store alike.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
import threading
from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, cast

from wovyr.clock import Clock, SystemClock
from wovyr.errors import InputError, NotFound, Problem, StoreError
from wovyr.ids import TENANT_RULE, is_tenant
from wovyr.store.audit import AuditEntry
from wovyr.store.base import DEFAULT_TENANT
from wovyr.store.platform import ApiKeyRecord, ApiKeyStore

__all__ = [
    "CACHE_SIZE",
    "CACHE_TTL",
    "METRICS_ROLE",
    "ROLES",
    "ApiKeyRecord",
    "Authenticator",
    "Principal",
    "PrincipalCache",
    "hash_token",
    "role_at_least",
    "validate_tenant",
]

log = logging.getLogger("wovyr.auth")
ROLES = ("viewer", "operator", "admin")
_RANK = {role: rank for rank, role in enumerate(ROLES)}
# A key for the host's metrics scraper: reads `/metrics` with every tenant's series and
# nothing else (it ranks below viewer). Created on the server host only.
METRICS_ROLE = "metrics"
TOKEN_PREFIX = "wvr_"
_PREFIX_CHARS = 12  # "wvr_" + 8 characters: enough to tell keys apart, useless to guess
_MAX_TOKEN = 512
_TOUCH_EVERY = timedelta(seconds=60)  # last_used_at is advisory: not one write per request
CACHE_TTL = timedelta(seconds=5)  # how long a key revoked by another process may still work
CACHE_SIZE = 1024  # keys remembered at once


def role_at_least(role: str, needed: str) -> bool:
    """True when `role` may do what `needed` may; unknown roles may do nothing."""
    return _RANK.get(role, -1) >= _RANK[needed]


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def validate_tenant(tenant: str) -> str:
    if not is_tenant(tenant):
        raise InputError([Problem(TENANT_RULE, path="tenant")])
    return tenant


def bearer_token(headers: Any) -> str | None:
    """The token of an `Authorization: Bearer <token>` header in `headers` (a mapping with
    `get`, or None), or None when there is none."""
    value = headers.get("authorization") if headers is not None else None
    if not isinstance(value, str) or not value.lower().startswith("bearer "):
        return None
    return value[7:].strip() or None


@dataclass(frozen=True)
class Principal:
    """Who is calling: the tenant and role of the API key that authenticated the request."""

    tenant: str
    role: str
    key_id: str
    name: str = ""

    def can(self, needed: str) -> bool:
        return role_at_least(self.role, needed)

    @property
    def audit_actor(self) -> str:
        """Who this caller is in the audit chain: the key's id and role (both fixed for the
        key's life; its name is the owner's label and may repeat)."""
        return f"key:{self.key_id}/{self.role}"

    @property
    def actor(self) -> str:
        """How decisions by this caller are recorded (an approval's `by`)."""
        return self.name or self.key_id


class PrincipalCache:
    """The principals of keys verified lately, by their tokens' hashes: at most `size`
    (the least recently used go first), each for `ttl` after it was read from the store.
    Only valid keys are kept (a flood of bad tokens cannot fill it). `forget(key_id)`
    drops a key, and a principal read from the store before that cannot be put back: it
    carries the generation it was read in (`generation`), and a forget moves it on."""

    def __init__(self, clock: Clock, ttl: timedelta = CACHE_TTL, size: int = CACHE_SIZE) -> None:
        self.clock, self.ttl, self.size = clock, ttl, size
        self._entries: OrderedDict[str, tuple[Principal, datetime]] = OrderedDict()
        self._lock = threading.Lock()
        self.generation = 0

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, digest: str) -> Principal | None:
        with self._lock:
            found = self._entries.get(digest)
            if found is None:
                return None
            if self.clock.now() >= found[1]:
                del self._entries[digest]
                return None
            self._entries.move_to_end(digest)
            return found[0]

    def put(self, digest: str, principal: Principal, generation: int) -> None:
        """Remember `principal`, read from the store in `generation` (unless a key was
        forgotten since: it could be this one)."""
        with self._lock:
            if generation != self.generation or self.size <= 0:
                return
            self._entries[digest] = (principal, self.clock.now() + self.ttl)
            self._entries.move_to_end(digest)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)

    def forget(self, key_id: str) -> None:
        with self._lock:
            self.generation += 1
            for digest in [d for d, (p, _) in self._entries.items() if p.key_id == key_id]:
                del self._entries[digest]


class Authenticator:
    """Creates, verifies, lists and revokes API keys over a store with `ApiKeyStore`;
    remembers the keys it verified (`cache`, see the module's docstring)."""

    def __init__(
        self,
        store: object,
        clock: Clock | None = None,
        *,
        cache_ttl: timedelta = CACHE_TTL,
        cache_size: int = CACHE_SIZE,
    ) -> None:
        self.store = cast(ApiKeyStore, store)
        self.clock: Clock = clock or SystemClock()
        self.cache = PrincipalCache(self.clock, cache_ttl, cache_size)

    def cached(self, token: str | None) -> Principal | None:
        """The principal of `token` if this authenticator verified it lately (no store
        read); None: not remembered (`verify` answers)."""
        if not token or len(token) > _MAX_TOKEN or not token.startswith(TOKEN_PREFIX):
            return None
        return self.cache.get(hash_token(token))

    def verify(self, token: str | None) -> Principal | None:
        """The principal of a valid, unrevoked token; None for anything else."""
        if not token or len(token) > _MAX_TOKEN or not token.startswith(TOKEN_PREFIX):
            return None
        digest = hash_token(token)
        found = self.cache.get(digest)
        if found is not None:
            return found
        generation = self.cache.generation  # before the read: a revoke after it wins
        record = self.store.api_key_by_hash(digest)
        if record is None or not hmac.compare_digest(record.key_hash, digest):
            return None
        principal = self._principal(record)
        if principal is not None:
            self.cache.put(digest, principal, generation)
        return principal

    def principal_for_key(self, key_id: str) -> Principal | None:
        """The principal of an unrevoked key by id (for sessions that remember the id)."""
        record = self.store.get_api_key(key_id)
        return None if record is None else self._principal(record)

    def _principal(self, record: ApiKeyRecord) -> Principal | None:
        if record.revoked_at is not None or (
            record.role not in _RANK and record.role != METRICS_ROLE
        ):
            return None
        now = self.clock.now()
        if record.last_used_at is None or now - record.last_used_at >= _TOUCH_EVERY:
            try:
                self.store.touch_api_key(record.id, now)
            except StoreError as exc:  # advisory: a busy store must not refuse the request
                log.warning("could not record the use of key %s: %s", record.id, exc)
        return Principal(record.tenant, record.role, record.id, record.name)

    def create_key(
        self, tenant: str, role: str, name: str = "", *, actor: str | None = None
    ) -> tuple[str, str]:
        """A new key: returns (key id, token). The token is shown once and never stored.
        With an `actor`, the creation is appended to the audit chain in its transaction."""
        record, token = self._new_record(tenant, role, name)
        audit = self._audit(
            actor, tenant, "api_key.create", record.id, {"role": role, "name": name}
        )
        if not self.store.create_api_key(
            record, audit=audit
        ):  # pragma: no cover - 128-bit id collision
            raise InputError([Problem("could not create the key; try again")])
        return record.id, token

    def bootstrap_admin_if_empty(self) -> str | None:
        """On a store with no key at all, create one admin key for tenant "default" and
        return its token (once); None when any key exists."""
        record, token = self._new_record(DEFAULT_TENANT, "admin", "bootstrap")
        return token if self.store.create_api_key(record, only_if_none=True) else None

    def list_keys(self, tenant: str | None = None) -> list[ApiKeyRecord]:
        return self.store.list_api_keys(tenant)

    def get_key(self, key_id: str, tenant: str | None = None) -> ApiKeyRecord:
        record = self.store.get_api_key(key_id)
        if record is None or (tenant is not None and record.tenant != tenant):
            raise NotFound(f"API key {key_id!r} not found")
        return record

    def revoke(
        self, key_id: str, tenant: str | None = None, *, actor: str | None = None
    ) -> ApiKeyRecord:
        """Revoke a key (of `tenant`, when given); revoking twice keeps the first time. With
        an `actor`, the revocation is appended to the audit chain in its transaction."""
        found = self.get_key(key_id, tenant)
        audit = self._audit(actor, found.tenant, "api_key.revoke", key_id, {"role": found.role})
        try:
            self.store.revoke_api_key(key_id, self.clock.now(), audit=audit)
        finally:  # after the write: a verify that read the key before it cannot keep it
            self.cache.forget(key_id)
        return self.get_key(key_id, tenant)

    def _audit(
        self, actor: str | None, tenant: str, action: str, target: str, details: dict[str, str]
    ) -> AuditEntry | None:
        if actor is None:
            return None
        return AuditEntry(self.clock.now(), tenant, actor, action, target, details)

    def _new_record(self, tenant: str, role: str, name: str) -> tuple[ApiKeyRecord, str]:
        validate_tenant(tenant)
        if role not in _RANK and role != METRICS_ROLE:
            roles = ", ".join((*ROLES, METRICS_ROLE))
            raise InputError([Problem(f"role must be one of {roles}", path="role")])
        if len(name) > 200:
            raise InputError([Problem("a key name is at most 200 characters", path="name")])
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        record = ApiKeyRecord(
            id="key_" + secrets.token_hex(8),
            tenant=tenant,
            role=role,
            name=name,
            prefix=token[:_PREFIX_CHARS],
            key_hash=hash_token(token),
            created_at=self.clock.now(),
        )
        return record, token
