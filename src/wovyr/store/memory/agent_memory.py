"""Agent memory of the memory store (mixed into MemoryStore): dicts under the store lock."""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from wovyr.store.agent_memory import (
    WRITE_ID_DAYS,
    MemoryItem,
    MemoryPut,
    MemoryWriteResult,
    VectorColumns,
)
from wovyr.store.audit import AuditEntry, AuditRecord
from wovyr.store.codec import dumps, loads
from wovyr.store.vectors import VectorSearch

__all__ = ["MemoryAgentMemory", "StoredMemory"]


@dataclass(frozen=True)
class StoredMemory:
    item: MemoryItem
    embedding: bytes | None
    seq: int  # the namespace's version at this write


def _live(stored: StoredMemory | None, now: datetime) -> StoredMemory | None:
    if stored is None:
        return None
    expires = stored.item.expires_at
    return stored if expires is None or expires > now else None


class MemoryAgentMemory(VectorSearch):
    """Needs `_lock`, `_memory_items`, `_memory_versions`, `_memory_writes` and
    `_append_audit` from MemoryStore."""

    _lock: threading.RLock
    _memory_items: dict[tuple[str, str], dict[str, StoredMemory]]  # (tenant, namespace)
    _memory_versions: dict[tuple[str, str], tuple[int, int]]  # -> (version, deletes)
    _memory_writes: dict[tuple[str, str], tuple[MemoryWriteResult, datetime]]  # (tenant, id)
    _append_audit: Callable[[AuditEntry | None], AuditRecord | None]

    def _replayed(
        self, tenant: str, write_id: str | None, now: datetime
    ) -> MemoryWriteResult | None:
        horizon = now - timedelta(days=WRITE_ID_DAYS)
        for k in [
            k for k, (_, at) in self._memory_writes.items() if k[0] == tenant and at < horizon
        ]:
            del self._memory_writes[k]
        if write_id is None:
            return None
        found = self._memory_writes.get((tenant, write_id))
        return None if found is None else replace(found[0], applied=False)

    def _written(
        self,
        tenant: str,
        namespace: str,
        write_id: str | None,
        result: MemoryWriteResult,
        now: datetime,
    ) -> MemoryWriteResult:
        items = self._memory_items.setdefault((tenant, namespace), {})
        for key in [k for k, s in items.items() if _live(s, now) is None]:
            del items[key]  # the lazy purge of expired items
        if write_id is not None:
            self._memory_writes[(tenant, write_id)] = (result, now)
        return result

    def _bump(self, tenant: str, namespace: str, *, removed: bool) -> int:
        version, deletes = self._memory_versions.get((tenant, namespace), (0, 0))
        self._memory_versions[(tenant, namespace)] = (version + 1, deletes + int(removed))
        return version + 1

    def put_memory(
        self, put: MemoryPut, now: datetime, *, audit: AuditEntry | None = None
    ) -> MemoryWriteResult:
        value = loads(dumps(put.value))  # stored as the SQL stores keep it
        with self._lock:
            replayed = self._replayed(put.tenant, put.write_id, now)
            if replayed is not None:
                return replayed
            seq = self._bump(put.tenant, put.namespace, removed=False)
            items = self._memory_items.setdefault((put.tenant, put.namespace), {})
            before = _live(items.get(put.key), now)
            version = 1 if before is None else before.item.version + 1
            item = MemoryItem(
                put.tenant,
                put.namespace,
                put.key,
                value,
                put.text,
                put.embedding_model if put.embedding is not None else None,
                version,
                now,
                put.expires_at,
            )
            items[put.key] = StoredMemory(item, put.embedding, seq)
            result = MemoryWriteResult("put", put.key, version, before is not None)
            self._append_audit(audit)
            return self._written(put.tenant, put.namespace, put.write_id, result, now)

    def delete_memory(
        self,
        tenant: str,
        namespace: str,
        key: str,
        now: datetime,
        write_id: str | None = None,
        *,
        audit: AuditEntry | None = None,
    ) -> MemoryWriteResult:
        with self._lock:
            replayed = self._replayed(tenant, write_id, now)
            if replayed is not None:
                return replayed
            items = self._memory_items.setdefault((tenant, namespace), {})
            removed = items.pop(key, None)
            self._bump(tenant, namespace, removed=removed is not None)
            before = _live(removed, now)
            result = MemoryWriteResult("delete", key, 0, before is not None)
            if before is not None:
                self._append_audit(audit)
            return self._written(tenant, namespace, write_id, result, now)

    def get_memory(
        self, tenant: str, namespace: str, keys: Sequence[str], now: datetime
    ) -> list[MemoryItem]:
        with self._lock:
            items = self._memory_items.get((tenant, namespace), {})
            found = [_live(items.get(k), now) for k in keys]
        return [replace(s.item, value=loads(dumps(s.item.value))) for s in found if s is not None]

    def list_memory(
        self,
        tenant: str,
        namespace: str,
        now: datetime,
        *,
        prefix: str = "",
        after: str = "",
        limit: int = 100,
    ) -> list[MemoryItem]:
        with self._lock:
            items = self._memory_items.get((tenant, namespace), {})
            keys = sorted(
                k
                for k, s in items.items()
                if k.startswith(prefix) and k > after and _live(s, now) is not None
            )[:limit]
        return self.get_memory(tenant, namespace, keys, now)

    def memory_marks(self, tenant: str, namespace: str) -> tuple[int, int]:
        with self._lock:
            return self._memory_versions.get((tenant, namespace), (0, 0))

    def memory_vectors(
        self, tenant: str, namespace: str, model: str, after: int = 0
    ) -> VectorColumns:
        columns = VectorColumns([], [], [])
        with self._lock:
            for key, stored in self._memory_items.get((tenant, namespace), {}).items():
                mine = stored.embedding is not None and stored.item.embedding_model == model
                if (after and stored.seq <= after) or (not after and not mine):
                    continue
                expires = stored.item.expires_at
                columns.keys.append(key)
                columns.embeddings.append(stored.embedding if mine else None)
                columns.expires.append(math.inf if expires is None else expires.timestamp())
        return columns
