"""The DefinitionRegistry half of the in-memory store (mixed into MemoryStore)."""

from __future__ import annotations

import threading
from dataclasses import replace

from wovyr.store.base import DEFAULT_TENANT, DefinitionRecord
from wovyr.store.registry import ApplyOutcome

__all__ = ["MemoryRegistry"]


class MemoryRegistry:
    _lock: threading.RLock

    def _registry(self) -> list[DefinitionRecord]:
        if not hasattr(self, "_registered"):
            self._registered: list[DefinitionRecord] = []
        return self._registered

    def put_definition(self, record: DefinitionRecord) -> None:
        raise NotImplementedError  # provided by MemoryStore

    def apply_definition(self, record: DefinitionRecord) -> ApplyOutcome:
        with self._lock:
            for known in self._registry():
                if (known.tenant, known.name, known.version) == (
                    record.tenant,
                    record.name,
                    record.version,
                ):
                    return "unchanged" if known.hash == record.hash else "conflict"
            self.put_definition(record)
            self._registry().append(record)
            return "applied"

    def registered_definition(
        self, name: str, version: str | None = None, tenant: str = DEFAULT_TENANT
    ) -> DefinitionRecord | None:
        with self._lock:
            found = [
                r
                for r in self._registry()
                if r.tenant == tenant
                and r.name == name
                and (version is None or r.version == version)
            ]
        return found[-1] if found else None

    def list_registered(self, tenant: str = DEFAULT_TENANT) -> list[DefinitionRecord]:
        with self._lock:
            return [replace(r) for r in reversed(self._registry()) if r.tenant == tenant]
