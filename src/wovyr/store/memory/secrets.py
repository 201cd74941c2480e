"""The KMS and secrets tables of the in-memory store (mixed into MemoryStore)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime

from wovyr.store.audit import AuditEntry, AuditRecord
from wovyr.store.secrets import SHREDDED, DataKeyRecord, KmsRootRecord, SecretRecord

__all__ = ["MemorySecrets"]


class MemorySecrets:
    _lock: threading.RLock
    _data_keys: dict[tuple[str, int], DataKeyRecord]
    _secrets: dict[tuple[str, str], SecretRecord]
    _kms_roots: dict[str, KmsRootRecord]
    _append_audit: Callable[[AuditEntry | None], AuditRecord | None]

    def add_data_key(self, record: DataKeyRecord) -> DataKeyRecord:
        with self._lock:
            return self._data_keys.setdefault((record.tenant, record.version), record)

    def data_key(self, tenant: str, version: int | None = None) -> DataKeyRecord | None:
        with self._lock:
            if version is not None:
                return self._data_keys.get((tenant, version))
            found = [r for (t, _), r in self._data_keys.items() if t == tenant]
        return max(found, key=lambda r: r.version) if found else None

    def list_data_keys(self) -> list[DataKeyRecord]:
        with self._lock:
            return [self._data_keys[k] for k in sorted(self._data_keys)]

    def rewrap_data_key(
        self, tenant: str, version: int, old_root_id: str, wrapped: bytes, root_id: str
    ) -> bool:
        with self._lock:
            current = self._data_keys.get((tenant, version))
            if current is None or current.root_id != old_root_id:
                return False
            self._data_keys[(tenant, version)] = replace(current, wrapped=wrapped, root_id=root_id)
            return True

    def shred_data_keys(self, tenant: str, *, audit: AuditEntry | None = None) -> int:
        with self._lock:
            found = [
                k for k, r in self._data_keys.items() if k[0] == tenant and r.root_id != SHREDDED
            ]
            for key in found:
                self._data_keys[key] = replace(self._data_keys[key], wrapped=b"", root_id=SHREDDED)
            self._append_audit(audit)
            return len(found)

    def scrub_data_keys(self) -> list[str]:
        return []  # nothing of a replaced record outlives it in memory

    def put_secret(
        self,
        tenant: str,
        name: str,
        ciphertext: bytes,
        key_version: int,
        at: datetime,
        by: str,
        *,
        audit: AuditEntry | None = None,
    ) -> SecretRecord:
        with self._lock:
            old = self._secrets.get((tenant, name))
            record = SecretRecord(
                tenant, name, 1 if old is None else old.version + 1, ciphertext, key_version,
                at if old is None else old.created_at, at, by,
            )  # fmt: skip
            self._secrets[(tenant, name)] = record
            self._append_audit(audit)
            return record

    def get_secret(self, tenant: str, name: str) -> SecretRecord | None:
        with self._lock:
            return self._secrets.get((tenant, name))

    def list_secrets(self, tenant: str) -> list[SecretRecord]:
        with self._lock:
            return [r for (t, n), r in sorted(self._secrets.items()) if t == tenant]

    def delete_secret(self, tenant: str, name: str, *, audit: AuditEntry | None = None) -> bool:
        with self._lock:
            if self._secrets.pop((tenant, name), None) is None:
                return False
            self._append_audit(audit)
            return True

    def kms_root(self, root_id: str) -> KmsRootRecord | None:
        with self._lock:
            return self._kms_roots.get(root_id)

    def put_kms_root(self, record: KmsRootRecord, *, audit: AuditEntry | None = None) -> None:
        with self._lock:
            self._kms_roots[record.root_id] = record
            self._append_audit(audit)
