"""One tenant's memory namespaces over the store (`wovyr.store.agent_memory`): the
`MemoryBackend` the worker hands the `memory` kind and an agent's memory tools, and what
the server and the CLI read and write memory through. Items come out as JSON data."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from wovyr.clock import Clock
from wovyr.store.agent_memory import (
    AgentMemoryStore,
    MemoryDelete,
    MemoryFilter,
    MemoryItem,
    MemoryPut,
)
from wovyr.store.audit import AuditEntry
from wovyr.store.vectors import pack

__all__ = ["TenantMemory", "item_data"]


def item_data(item: MemoryItem) -> dict[str, Any]:
    return {
        "key": item.key,
        "value": item.value,
        "text": item.text,
        "version": item.version,
        "updated_at": item.updated_at.isoformat(),
        "expires_at": None if item.expires_at is None else item.expires_at.isoformat(),
    }


class TenantMemory:
    """`tenant`'s namespaces in `store`; `clock` decides ttls and expiry."""

    def __init__(self, store: AgentMemoryStore, tenant: str, clock: Clock) -> None:
        self.store, self.tenant, self.clock = store, tenant, clock

    def put(
        self,
        namespace: str,
        key: str,
        value: Any,
        text: str | None,
        embedding: list[float] | None,
        model: str | None,
        ttl: float | None,
        write_id: str | None,
        *,
        audit: AuditEntry | None = None,
    ) -> dict[str, Any]:
        """Write an item (`audit`: the change's audit record, for a person's write)."""
        now = self.clock.now()
        put = MemoryPut(
            self.tenant,
            namespace,
            key,
            value,
            text,
            None if embedding is None else pack(embedding),
            model if embedding is not None else None,
            None if ttl is None else now + timedelta(seconds=ttl),
            write_id,
        )
        done = self.store.put_memory(put, now, audit=audit)
        return {
            "key": done.key,
            "version": done.version,
            "replaced": done.existed,
            "applied": done.applied,
        }

    def delete(
        self, namespace: str, key: str, write_id: str | None, *, audit: AuditEntry | None = None
    ) -> dict[str, Any]:
        now = self.clock.now()
        delete = MemoryDelete(self.tenant, namespace, key, write_id)
        done = self.store.delete_memory(delete, now, audit=audit)
        return {"key": done.key, "deleted": done.existed, "applied": done.applied}

    def get(self, namespace: str, key: str) -> dict[str, Any] | None:
        found = self.store.get_memory(self.tenant, namespace, [key], self.clock.now())
        return item_data(found[0]) if found else None

    def list_items(
        self, namespace: str, prefix: str, after: str, limit: int
    ) -> list[dict[str, Any]]:
        query = MemoryFilter(self.tenant, namespace, prefix, after, limit)
        items = self.store.list_memory(query, self.clock.now())
        return [item_data(i) for i in items]

    def search(
        self, namespace: str, vector: list[float], model: str, top_k: int
    ) -> list[dict[str, Any]]:
        hits = self.store.search_memory(
            self.tenant, namespace, vector, model, top_k, self.clock.now()
        )
        return [{**item_data(h.item), "score": round(h.score, 6)} for h in hits]
