"""The definition registry contract: name + version -> content hash, applied once.

Definitions themselves are stored by content hash (`DefinitionStore`); the registry names
them. Applying the same content under a name and version again changes nothing; a different
content under an existing name and version is refused (the caller must bump the version).
"""

from __future__ import annotations

from typing import Literal, Protocol

from wovyr.store.audit import AuditEntry
from wovyr.store.records import DEFAULT_TENANT, DefinitionRecord

__all__ = ["ApplyOutcome", "DefinitionRegistry"]

ApplyOutcome = Literal["applied", "unchanged", "conflict"]


class DefinitionRegistry(Protocol):
    def apply_definition(
        self, record: DefinitionRecord, *, audit: AuditEntry | None = None
    ) -> ApplyOutcome:
        """Store the definition (by hash) and register it under its name and version, in one
        transaction; `record.created_at` is the time applied. `audit` is appended to the
        audit chain in that transaction when it applies (not when unchanged or refused)."""
        ...

    def registered_definition(
        self, name: str, version: str | None = None, tenant: str = DEFAULT_TENANT
    ) -> DefinitionRecord | None:
        """The definition registered as `name` (`version`, or the latest applied)."""
        ...

    def list_registered(self, tenant: str = DEFAULT_TENANT) -> list[DefinitionRecord]:
        """Every registered (name, version), newest applied first; `created_at` = applied."""
        ...
