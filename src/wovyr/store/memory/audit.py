"""The audit half of the memory store (mixed into MemoryStore): the chain and its anchors,
appended under the store lock, so the chain head cannot move between read and append."""

from __future__ import annotations

import threading
from datetime import datetime

from wovyr.store.audit import GENESIS, AuditAnchor, AuditEntry, AuditRecord, next_record

__all__ = ["MemoryAudit"]


class MemoryAudit:
    _lock: threading.RLock
    _audit_log: list[AuditRecord]
    _audit_anchors: list[AuditAnchor]

    def _append_audit(self, entry: AuditEntry | None) -> AuditRecord | None:
        """Append `entry` (if any); the caller holds the lock and has applied its change."""
        if entry is None:
            return None
        with self._lock:
            head = self._audit_log[-1] if self._audit_log else None
            record = (
                next_record(entry, head.seq, head.hash) if head else next_record(entry, 0, GENESIS)
            )
            self._audit_log.append(record)
            return record

    def append_audit(self, entry: AuditEntry) -> AuditRecord:
        record = self._append_audit(entry)
        assert record is not None
        return record

    def audit_head(self) -> AuditRecord | None:
        with self._lock:
            return self._audit_log[-1] if self._audit_log else None

    def audit_records(
        self,
        *,
        after_seq: int = 0,
        limit: int = 1000,
        tenant: str | None = None,
        since: datetime | None = None,
    ) -> list[AuditRecord]:
        with self._lock:
            found = [
                r
                for r in self._audit_log
                if r.seq > after_seq
                and (tenant is None or r.tenant == tenant)
                and (since is None or r.at >= since)
            ]
        return found[:limit]

    def add_audit_anchor(self, anchor: AuditAnchor) -> None:
        with self._lock:
            self._audit_anchors.append(anchor)

    def audit_anchors(self) -> list[AuditAnchor]:
        with self._lock:
            return sorted(self._audit_anchors, key=lambda a: (a.seq, a.at))
