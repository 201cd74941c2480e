"""The KMS's `PayloadSealer`: tenants' execution payloads sealed with their data keys, and
`sealed_store`, which puts a `SealingStore` over a store (see `wovyr.store.sealing`).

A payload is sealed with the tenant's latest data key (the one its secrets use; made on
first use, and made anew after a shred) by AES-256-GCM with a random nonce and associated
data binding the tenant, the kind of object (`execution.input`, `execution.checkpoint`,
`execution.event`...), its name (the execution's id; for an event, `id/seq`) and the data
key's version. Its text is `1.<key version>.<base64 of the sealed blob>`.

Unwrapped data keys are kept for `KEY_TTL` seconds: a shred made by another process stops
this one within that time (the process that shreds forgets its own at once).
"""

from __future__ import annotations

import base64
import binascii
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

from wovyr.errors import KmsError
from wovyr.platform.secrets import Secrets, ShredReport, open_secrets, shred_tenant
from wovyr.store.base import Store
from wovyr.store.sealing import (
    NotSealed,
    PayloadKeyShredded,
    PayloadUndecryptable,
    SealingStore,
    fail_shredded,
)
from wovyr.store.secrets import SHREDDED

__all__ = [
    "KEY_TTL",
    "KmsPayloadSealer",
    "open_sealed",
    "sealed_store",
    "shred_tenant_payloads",
]

KEY_TTL = 1.0
_FORMAT = "1"


class KmsPayloadSealer:
    """Seals and opens payload texts with tenants' data keys (`Secrets`' KMS and store)."""

    def __init__(
        self,
        secrets: Secrets,
        *,
        ttl: float = KEY_TTL,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.secrets = secrets
        self._ttl = ttl
        self._monotonic = monotonic
        self._latest: dict[str, tuple[float, int, bytes]] = {}
        self._keys: dict[tuple[str, int], tuple[float, bytes | None]] = {}
        self._lock = threading.Lock()

    def forget(self, tenant: str) -> None:
        """Drop what is kept of `tenant`'s keys (after this process shredded them)."""
        with self._lock:
            self._latest.pop(tenant, None)
            for key in [k for k in self._keys if k[0] == tenant]:
                del self._keys[key]

    def _fresh(self, at: float) -> bool:
        return self._monotonic() - at < self._ttl

    def seal(self, tenant: str, kind: str, name: str, text: str) -> str:
        kept = self._latest.get(tenant)
        if kept is None or not self._fresh(kept[0]):
            version, key = self.secrets._data_key(tenant, datetime.now(UTC))
            kept = (self._monotonic(), version, key)
            with self._lock:
                self._latest[tenant] = kept
        _, version, key = kept
        blob = self.secrets.kms.seal(key, tenant, kind, name, version, text.encode("utf-8"))
        return f"{_FORMAT}.{version}.{base64.b64encode(blob).decode('ascii')}"

    def _key(self, tenant: str, version: int) -> bytes | None:
        """The data key (tenant, version); None when there is none (the value is not ours);
        `PayloadKeyShredded`; `KmsError` when this root key cannot unwrap it."""
        kept = self._keys.get((tenant, version))
        if kept is not None and self._fresh(kept[0]):
            return kept[1]
        record = self.secrets.store.data_key(tenant, version)
        if record is not None and record.root_id == SHREDDED:
            raise PayloadKeyShredded(f"the data key {version} of tenant {tenant!r} was shredded")
        key = None if record is None else self.secrets.kms.unwrap(record)
        with self._lock:
            self._keys[(tenant, version)] = (self._monotonic(), key)
        return key

    def open(self, tenant: str, kind: str, name: str, text: str) -> str:
        head, _, rest = text.partition(".")
        digits, _, body = rest.partition(".")
        if head != _FORMAT or not digits.isdigit() or not body:
            raise NotSealed("not a sealed payload")
        try:
            blob = base64.b64decode(body, validate=True)
        except (binascii.Error, ValueError):
            raise NotSealed("not a sealed payload") from None
        key = self._key(tenant, int(digits))
        if key is None:
            raise NotSealed(f"tenant {tenant!r} has no data key {digits}")
        try:
            opened = self.secrets.kms.open(key, tenant, kind, name, int(digits), blob)
        except KmsError as exc:
            raise PayloadUndecryptable(str(exc)) from None
        return opened.decode("utf-8")


def sealed_store(store: Store, secrets: Secrets) -> SealingStore:
    """`store` with its sealing tenants' payloads sealed by `secrets`' KMS."""
    if isinstance(store, SealingStore):
        return store
    # (a nominal `Store`: the contract's plain methods are the inner store's, bound per
    # instance from the declaration in `wovyr.store.sealing`, which mypy cannot see)
    return SealingStore(store, KmsPayloadSealer(secrets))  # type: ignore[abstract]


def open_sealed(
    store: Store, home: Path, env: Mapping[str, str] | None = None
) -> tuple[SealingStore, Secrets]:
    """The secrets of `store` (`open_secrets`) and the store sealed with them."""
    secrets = open_secrets(store, home, env)
    return sealed_store(store, secrets), secrets


def shred_tenant_payloads(
    store: Store, tenant: str, *, by: str, at: datetime, actor: str | None = None
) -> ShredReport:
    """Crypto-shred `tenant` (`shred_tenant`: its data keys, so its secrets and its sealed
    payloads never open again, here and in every copy of the database taken after it; the
    report says where the store could not scrub earlier copies) and fail its running
    executions with sealed payloads: they cannot run on. Those are failed just before the
    keys go (so a step a worker has in flight conflicts and is dropped, never sealed again
    under a new key) and once more after (any started meanwhile). On a store that does not
    seal, only the shred."""
    if not isinstance(store, SealingStore):
        return shred_tenant(store, tenant, by=by, at=at, actor=actor)
    failed = fail_shredded(store, tenant, at, before=True)
    report = shred_tenant(store, tenant, by=by, at=at, actor=actor)
    if isinstance(store.sealer, KmsPayloadSealer):
        store.sealer.forget(tenant)
    failed += fail_shredded(store, tenant, at)
    return replace(report, executions_failed=failed)
