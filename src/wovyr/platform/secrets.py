"""Tenants' secrets: set, list, delete, and `resolve_secret` at dispatch.

A secret is a named text value of one tenant (an API key, a password), sealed with the
tenant's data key (`wovyr.platform.kms`) and stored in the same database as everything else
(`SecretStore`). Its value is never returned by anything but `resolve_secret`, which the
worker calls when it dispatches an attempt whose input references `${{ secrets.NAME }}`
(and which a provider gateway calls for its API keys). Listing gives names, versions and
times only. Another tenant's secret answers exactly like a missing one.

Setting, deleting and shredding are the audited actions of this module
(`Secrets.set_secret`, `Secrets.delete_secret`, `shred_tenant`: the one place each change
is made). With an `actor`, each appends one audit record in the change's transaction; the
secret's name is the target, and the record never holds the value nor a hash of it (a
low-entropy value could be guessed offline from a hash).

**The audit anchor key** (`audit_anchor_key`) comes from a data key like a tenant's, of the
reserved owner `AUDIT_ANCHOR_OWNER` (outside the tenant alphabet, so no tenant can have it
and shredding a tenant never touches it): the KMS creates it on first use and a rotation
re-wraps it like every other, so the anchor key, and every anchor signed with it, survives
`wovyr admin kms rotate`. Its row is authenticated by the root key (AES-GCM, the associated
data binding the owner and the version): someone holding only the database can delete,
tombstone or alter it, but not make it give another key. So a key that does not open is an
error, never a reason to check less, and a new key is made only while no anchor exists
(`find_audit_anchor_key`, which checks, never makes one).
"""

from __future__ import annotations

import hashlib
import hmac
import re
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from wovyr.activities.redact import MIN_SECRET_CHARS
from wovyr.errors import InputError, KmsError, NotFound, Problem
from wovyr.platform.fields import checked_name, shown_fields
from wovyr.store.audit import AuditEntry, AuditStore
from wovyr.store.secrets import SHREDDED, NewSecret, SecretRecord, SecretStore

if TYPE_CHECKING:  # loaded with the KMS, on first use: `cryptography` costs a CLI start
    from wovyr.platform.kms import Kms

__all__ = [
    "AUDIT_ANCHOR_OWNER",
    "MAX_SECRET_BYTES",
    "MIN_SECRET_CHARS",
    "SECRET_NAME",
    "SecretInfo",
    "SecretMissing",
    "Secrets",
    "ShredReport",
    "audit_anchor_key",
    "check_secret_name",
    "find_audit_anchor_key",
    "open_secrets",
    "shred_tenant",
]

SECRET_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
MAX_SECRET_BYTES = 65_536
_KIND = "secret"

#: The owner of the data key the audit anchor key comes from: `~` is outside the tenant
#: alphabet (`wovyr.platform.auth.validate_tenant`), so no tenant is ever called this.
AUDIT_ANCHOR_OWNER = "~audit-anchor"
_ANCHOR_INFO = b"wovyr audit-anchor"


class SecretMissing(NotFound):
    """No such secret."""


@dataclass(frozen=True)
class SecretInfo:
    """What may be shown of a secret: never its value."""

    name: str
    version: int
    created_at: datetime
    updated_at: datetime
    updated_by: str

    @classmethod
    def of(cls, record: SecretRecord) -> SecretInfo:
        return cls(
            record.name, record.version, record.created_at, record.updated_at, record.updated_by
        )

    def to_dict(self) -> dict[str, Any]:
        return shown_fields(self)


def check_secret_name(name: str, path: str = "name") -> str:
    """`name` if it is a secret name (a letter or `_`, then letters, digits, `_`; at most
    128), else `InputError`."""
    return checked_name(
        name,
        SECRET_NAME,
        path,
        "a secret name is a letter or '_' followed by letters, digits or '_' (at most 128)",
        "e.g. OPENAI_API_KEY",
    )


def _check_value(value: str) -> bytes:
    if not isinstance(value, str) or not value:
        raise InputError([Problem("a secret's value must be non-empty text", path="value")])
    if len(value) < MIN_SECRET_CHARS:
        raise InputError(
            [
                Problem(
                    f"a secret's value is at least {MIN_SECRET_CHARS} characters: a shorter "
                    "one cannot be masked where a step echoes it (outputs, errors, logs) "
                    "without masking ordinary text",
                    path="value",
                    hint="use a longer value (a generated key or token)",
                )
            ]
        )
    data = value.encode("utf-8")
    if len(data) > MAX_SECRET_BYTES:
        raise InputError(
            [Problem(f"a secret's value is at most {MAX_SECRET_BYTES} bytes", path="value")]
        )
    return data


class Secrets:
    """Secrets over a store, with the KMS loaded on first use (`kms`: the KMS, or a function
    that loads it, so processes that never touch a secret never load a key)."""

    def __init__(self, store: SecretStore, kms: Kms | Callable[[], Kms]) -> None:
        self.store = store
        self._kms: Kms | None = None if callable(kms) else kms
        self._load: Callable[[], Kms] | None = kms if callable(kms) else None
        self._lock = threading.Lock()

    @property
    def kms(self) -> Kms:
        if self._kms is None:
            with self._lock:
                if self._kms is None:
                    assert self._load is not None
                    self._kms = self._load()
        return self._kms

    def _data_key(self, tenant: str, at: datetime) -> tuple[int, bytes]:
        """The tenant's latest data key (created on first use)."""
        kms = self.kms
        record = self.store.data_key(tenant)
        if record is None or record.root_id == SHREDDED:  # a shredded tenant starts afresh
            kms.register(self.store, at)
            version = 1 if record is None else record.version + 1
            record = self.store.add_data_key(kms.new_data_key(tenant, version, at))
        return record.version, kms.unwrap(record)

    def set_secret(
        self,
        tenant: str,
        name: str,
        value: str,
        *,
        by: str,
        at: datetime,
        actor: str | None = None,
    ) -> SecretInfo:
        """Seal and store `value` as `tenant`'s secret `name` (a new version). With an
        `actor`, `secret.set` is appended to the audit chain in the same transaction."""
        check_secret_name(name)
        data = _check_value(value)
        version, data_key = self._data_key(tenant, at)
        sealed = self.kms.seal(data_key, tenant, _KIND, name, version, data)
        audit = None
        if actor is not None:  # never the value, nor a hash of it
            audit = AuditEntry(at, tenant, actor, "secret.set", name, {"key_version": version})
        record = self.store.put_secret(
            NewSecret(tenant, name, sealed, version, at, by), audit=audit
        )
        return SecretInfo.of(record)

    def delete_secret(
        self, tenant: str, name: str, *, by: str, at: datetime, actor: str | None = None
    ) -> None:
        """Delete `tenant`'s secret `name`; `SecretMissing` if it has none. With an
        `actor`, `secret.delete` is appended to the audit chain in the same transaction
        (nothing when there was no such secret)."""
        check_secret_name(name)
        audit = None if actor is None else AuditEntry(at, tenant, actor, "secret.delete", name)
        if not self.store.delete_secret(tenant, name, audit=audit):
            raise SecretMissing(f"no secret {name!r}")

    def list_secrets(self, tenant: str) -> list[SecretInfo]:
        return [SecretInfo.of(r) for r in self.store.list_secrets(tenant)]

    def secret_info(self, tenant: str, name: str) -> SecretInfo:
        check_secret_name(name)
        record = self.store.get_secret(tenant, name)
        if record is None:
            raise SecretMissing(f"no secret {name!r}")
        return SecretInfo.of(record)

    def resolve_secret(self, tenant: str, name: str) -> str:
        """The value of `tenant`'s secret `name`: `SecretMissing` naming it when there is
        none, `KmsError` when it does not decrypt (never a value in either)."""
        record = self.store.get_secret(tenant, name) if SECRET_NAME.match(name) else None
        if record is None:
            raise SecretMissing(
                f"no secret {name!r} in tenant {tenant!r}",
                hint=f"set it: wovyr secrets set {name} --tenant {tenant}",
            )
        kms = self.kms
        key = self.store.data_key(tenant, record.key_version)
        if key is None:
            raise SecretMissing(
                f"the data key that sealed secret {name!r} of tenant {tenant!r} is gone",
                hint="set the secret again",
            )
        data_key = kms.unwrap(key)
        opened = kms.open(data_key, tenant, _KIND, name, record.key_version, record.ciphertext)
        return opened.decode("utf-8")


def open_secrets(store: SecretStore, home: Path, env: Mapping[str, str] | None = None) -> Secrets:
    """The secrets of `store`, with the KMS of `home` and the environment loaded on first
    use (`.kms` loads it at once: what a server or worker does at start, to warn and to fail
    early on a bad key)."""

    def load() -> Kms:
        from wovyr.platform.kms import load_kms

        return load_kms(home, env)

    return Secrets(store, load)


@dataclass(frozen=True)
class ShredReport:
    """What `shred_tenant` did: the data keys it destroyed now, and where earlier copies of
    their rows may remain that the store could not scrub (each a sentence; empty when the
    store's own files hold none). `executions_failed` is the sealed-payload shred's."""

    destroyed: int
    remains: tuple[str, ...] = ()
    executions_failed: int = 0

    def to_dict(self, tenant: str) -> dict[str, Any]:
        return {
            "tenant": tenant,
            "data_keys_destroyed": self.destroyed,
            "executions_failed": self.executions_failed,
            "scrubbed": not self.remains,
            "remains": list(self.remains),
        }


def shred_tenant(
    store: SecretStore, tenant: str, *, by: str, at: datetime, actor: str | None = None
) -> ShredReport:
    """Crypto-shred `tenant`: destroy its data keys, so every secret they sealed is
    unreadable (the ciphertexts stay, and never open again); other tenants are untouched.
    Then scrub the store (`SecretStore.scrub_data_keys`), so that its files keep no earlier
    version of a destroyed key's row that the root key would open; the report says where
    copies may remain (PostgreSQL's write-ahead log; backups are never touched). With an
    `actor`, `tenant.shred` is appended to the audit chain in the same transaction. The
    audit anchor key's owner is never shredded (`ValueError`)."""
    if tenant == AUDIT_ANCHOR_OWNER:
        raise ValueError("the audit anchor key is not a tenant's: it is never shredded")
    audit = None if actor is None else AuditEntry(at, tenant, actor, "tenant.shred", tenant)
    destroyed = store.shred_data_keys(tenant, audit=audit)
    return ShredReport(destroyed, tuple(store.scrub_data_keys()))


def find_audit_anchor_key(secrets: Secrets) -> bytes | None:
    """The key that signs and checks audit anchors (HMAC-SHA256, info `wovyr audit-anchor`,
    of the data key of `AUDIT_ANCHOR_OWNER`), or None when this store never made one. Never
    creates a key. Loads the KMS. `KmsError` when the KMS does not load, or the row is there
    but gives no key: tombstoned (Wovyr never shreds it), wrapped by a root key this process
    lacks, or altered (its wrapping does not open)."""
    record = secrets.store.data_key(AUDIT_ANCHOR_OWNER)
    if record is None:
        return None
    if record.root_id == SHREDDED:
        raise KmsError(
            "the audit anchor key's row is marked shredded, which Wovyr never does: the "
            "database was altered",
            hint="check the chain with `wovyr admin audit verify` against exported anchors",
        )
    data_key = secrets.kms.unwrap(record)
    return hmac.new(data_key, _ANCHOR_INFO, hashlib.sha256).digest()


def audit_anchor_key(secrets: Secrets, at: datetime, chain: AuditStore) -> bytes:
    """The audit anchor key for signing (`find_audit_anchor_key`), created on first use at
    `at` like a tenant's data key (re-wrapped, never changed, by a rotation). The ONE place
    it is made, and only while `chain` holds no anchor: anchors without their key mean the
    row was removed, and a new key would make the old anchors fail and new ones pass
    (`KmsError`). Loads the KMS: `KmsError` when it cannot (a bad root key, or not the one
    this store's data keys are wrapped by)."""
    found = find_audit_anchor_key(secrets)
    if found is not None:
        return found
    anchors = chain.audit_anchors()
    if anchors:
        raise KmsError(
            f"the audit chain has {len(anchors)} signed anchor(s) but the key that signed them "
            "is gone from the database: it was removed, and a new key would hide that",
            hint="check the chain with `wovyr admin audit verify` against exported anchors; "
            "to sign with a new key, first export and remove the audit_anchors rows",
        )
    secrets._data_key(AUDIT_ANCHOR_OWNER, at)
    key = find_audit_anchor_key(secrets)
    assert key is not None  # just made (or made by another process meanwhile)
    return key
