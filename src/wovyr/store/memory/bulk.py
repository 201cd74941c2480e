"""Bulk-action batches in the memory store (mixed into MemoryStore); a delete purges through
the retention role's `purge_executions`."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from wovyr.errors import StoreError
from wovyr.store.audit import AuditEntry, AuditRecord
from wovyr.store.bulk import (
    BatchItem,
    BatchRecord,
    BatchUpdate,
    ItemOutcome,
    NewBatch,
)
from wovyr.store.codec import dumps, loads
from wovyr.store.records import ExecutionKey, ExecutionRecord

__all__ = ["MemoryBulk"]

_COUNTED: dict[str, str] = {"ok": "ok", "skipped": "skipped", "error": "errors"}


class MemoryBulk:
    """Needs the lock, the execution tables and `_append_audit` from MemoryStore."""

    _lock: threading.RLock
    _executions: dict[ExecutionKey, ExecutionRecord]
    _batches: dict[tuple[str, str], BatchRecord]
    _batch_items: dict[tuple[str, str], list[BatchItem]]
    _append_audit: Callable[[AuditEntry | None], AuditRecord | None]

    def create_batch(self, new: NewBatch) -> tuple[bool, BatchRecord]:
        payload: Any = loads(dumps(new.payload))  # as the SQL stores keep it
        with self._lock:
            mine = [b for b in self._batches.values() if b.tenant == new.tenant]
            for b in mine:
                if new.idempotency_key is not None and b.idempotency_key == new.idempotency_key:
                    return False, b
            for b in mine:
                if b.status == "running" and b.fingerprint == new.fingerprint:
                    return False, b
            if (new.tenant, new.id) in self._batches:
                raise StoreError(f"batch {new.id} exists already")
            record = BatchRecord(
                tenant=new.tenant,
                id=new.id,
                action=new.action,
                filter=loads(dumps(dict(new.filter))),
                signal=new.signal,
                payload=payload,
                created_at=new.created_at,
                created_by=new.created_by,
                fingerprint=new.fingerprint,
                idempotency_key=new.idempotency_key,
                status="running",
                updated_at=new.created_at,
                finished_at=None,
                cursor=None,
                listed_all=False,
                listed=0,
                ok=0,
                skipped=0,
                errors=0,
                pages=0,
            )
            self._batches[(new.tenant, new.id)] = record
            self._batch_items[(new.tenant, new.id)] = []
            self._append_audit(new.audit)
            return True, record

    def get_batch(self, tenant: str, batch_id: str) -> BatchRecord | None:
        with self._lock:
            return self._batches.get((tenant, batch_id))

    def list_batches(self, tenant: str, limit: int = 50) -> list[BatchRecord]:
        with self._lock:
            mine = [b for b in self._batches.values() if b.tenant == tenant]
        mine.sort(key=lambda b: (b.created_at, b.id), reverse=True)
        return mine[:limit]

    def batch_items(
        self,
        tenant: str,
        batch_id: str,
        after: int = 0,
        limit: int = 100,
        outcome: ItemOutcome | None = None,
    ) -> list[BatchItem]:
        with self._lock:
            items = self._batch_items.get((tenant, batch_id), [])
            chosen = [i for i in items[max(after, 0) :] if outcome is None or i.outcome == outcome]
        return chosen[:limit]

    def claim_batch(self, owner: str, now: datetime, lease_seconds: float) -> BatchRecord | None:
        with self._lock:
            free = [
                b
                for b in self._batches.values()
                if b.status == "running"
                and (b.lease_until is None or b.lease_until < now or b.lease_owner == owner)
            ]
            if not free:
                return None
            chosen = min(free, key=lambda b: (b.updated_at, b.tenant, b.id))
            leased = replace(
                chosen,
                lease_owner=owner,
                lease_until=now + timedelta(seconds=lease_seconds),
                fence=chosen.fence + 1,
            )
            self._batches[(chosen.tenant, chosen.id)] = leased
            return leased

    def update_batch(self, update: BatchUpdate) -> BatchRecord | None:
        key = (update.tenant, update.batch_id)
        with self._lock:
            batch = self._batches.get(key)
            if batch is None or batch.fence != update.fence or batch.status != "running":
                return None
            items = self._batch_items[key]
            known = {i.execution_id for i in items}
            listed = [e for e in dict.fromkeys(update.listed) if e not in known]
            for execution_id in listed:
                items.append(BatchItem(len(items) + 1, execution_id, "pending"))
            counts = {"ok": batch.ok, "skipped": batch.skipped, "errors": batch.errors}
            where = {i.execution_id: k for k, i in enumerate(items)}
            for outcome in update.outcomes:
                k = where.get(outcome.execution_id)
                if k is None or items[k].outcome != "pending" or outcome.outcome == "pending":
                    continue
                items[k] = replace(
                    items[k], outcome=outcome.outcome, detail=outcome.detail, at=update.now
                )
                counts[_COUNTED[outcome.outcome]] += 1
            total = batch.listed + len(listed)
            listed_all = batch.listed_all or update.listed_all
            done = listed_all and total == sum(counts.values())
            batch = replace(
                batch,
                listed=total,
                cursor=update.cursor if update.listed or update.listed_all else batch.cursor,
                listed_all=listed_all,
                pages=batch.pages + (1 if update.listed or update.listed_all else 0),
                updated_at=update.now,
                status="completed" if done else "running",
                finished_at=update.now if done else None,
                lease_owner=None if done else batch.lease_owner,
                lease_until=None if done else update.lease_until,
                ok=counts["ok"],
                skipped=counts["skipped"],
                errors=counts["errors"],
            )
            self._batches[key] = batch
            return batch
