"""The DefinitionRegistry half of the in-memory store (mixed into MemoryStore, which creates
the table)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import replace

from wovyr.store.audit import AuditEntry, AuditRecord
from wovyr.store.base import DEFAULT_TENANT, DefinitionRecord
from wovyr.store.registry import ApplyOutcome

__all__ = ["MemoryRegistry"]


class MemoryRegistry:
    _lock: threading.RLock
    _definitions: dict[tuple[str, str], DefinitionRecord]  # (tenant, hash)
    _registered: list[DefinitionRecord]

    _append_audit: Callable[[AuditEntry | None], AuditRecord | None]

    def apply_definition(
        self, record: DefinitionRecord, *, audit: AuditEntry | None = None
    ) -> ApplyOutcome:
        with self._lock:
            for known in self._registered:
                if (known.tenant, known.name, known.version) == (
                    record.tenant,
                    record.name,
                    record.version,
                ):
                    return "unchanged" if known.hash == record.hash else "conflict"
            self._definitions.setdefault((record.tenant, record.hash), record)
            self._registered.append(record)
            self._append_audit(audit)
            return "applied"

    def registered_definition(
        self, name: str, version: str | None = None, tenant: str = DEFAULT_TENANT
    ) -> DefinitionRecord | None:
        with self._lock:
            found = [
                r
                for r in self._registered
                if r.tenant == tenant
                and r.name == name
                and (version is None or r.version == version)
            ]
        return found[-1] if found else None

    def list_registered(self, tenant: str = DEFAULT_TENANT) -> list[DefinitionRecord]:
        with self._lock:
            return [replace(r) for r in reversed(self._registered) if r.tenant == tenant]
