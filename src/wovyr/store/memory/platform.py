"""The platform half of the in-memory store (API keys, idempotency keys, revoked sessions,
tenants; mixed into MemoryStore, which creates the tables)."""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import date, datetime
from typing import Any

from wovyr.store.audit import AuditEntry, AuditRecord
from wovyr.store.platform import (
    ApiKeyRecord,
    IdempotencyRecord,
    McpServerRecord,
    ProviderRecord,
    TenantRecord,
)
from wovyr.store.quotas import debit_refused, running_refused
from wovyr.store.records import Debit, ExecutionRecord, NewExecution

__all__ = ["MemoryPlatform"]


class MemoryPlatform:
    _lock: threading.RLock
    _api_keys: dict[str, ApiKeyRecord]
    _idempotency_keys: dict[tuple[str, str], IdempotencyRecord]
    _revoked_sessions: dict[str, datetime]
    _tenants: dict[str, TenantRecord]
    _quota_usage: dict[tuple[str, str, date], float]  # (tenant, budget, day) -> used
    _executions: dict[tuple[str, str], ExecutionRecord]
    _append_audit: Callable[[AuditEntry | None], AuditRecord | None]
    _responses: dict[tuple[str, str], dict[str, Any]]  # (tenant, request hash) -> response
    _providers: dict[tuple[str, str], ProviderRecord]  # (tenant, name) -> provider
    _mcp_servers: dict[tuple[str, str], McpServerRecord]  # (tenant, name) -> server

    def put_mcp_server(self, record: McpServerRecord, *, audit: AuditEntry | None = None) -> None:
        with self._lock:
            self._mcp_servers[(record.tenant, record.name)] = record
            self._append_audit(audit)

    def get_mcp_server(self, tenant: str, name: str) -> McpServerRecord | None:
        with self._lock:
            return self._mcp_servers.get((tenant, name))

    def list_mcp_servers(self, tenant: str) -> list[McpServerRecord]:
        with self._lock:
            return [r for (t, _), r in sorted(self._mcp_servers.items()) if t == tenant]

    def delete_mcp_server(self, tenant: str, name: str, *, audit: AuditEntry | None = None) -> bool:
        with self._lock:
            if self._mcp_servers.pop((tenant, name), None) is None:
                return False
            self._append_audit(audit)
            return True

    def get_cached_response(self, tenant: str, key: str) -> dict[str, Any] | None:
        with self._lock:
            found = self._responses.get((tenant, key))
            return copy.deepcopy(found) if found is not None else None

    def put_cached_response(
        self, tenant: str, key: str, response: dict[str, Any], at: datetime
    ) -> None:
        with self._lock:
            self._responses.setdefault((tenant, key), copy.deepcopy(response))

    def put_provider(self, record: ProviderRecord, *, audit: AuditEntry | None = None) -> None:
        with self._lock:
            self._providers[(record.tenant, record.name)] = record
            self._append_audit(audit)

    def get_provider(self, tenant: str, name: str) -> ProviderRecord | None:
        with self._lock:
            return self._providers.get((tenant, name))

    def list_providers(self, tenant: str) -> list[ProviderRecord]:
        with self._lock:
            return [r for (t, _), r in sorted(self._providers.items()) if t == tenant]

    def delete_provider(self, tenant: str, name: str, *, audit: AuditEntry | None = None) -> bool:
        with self._lock:
            if self._providers.pop((tenant, name), None) is None:
                return False
            self._append_audit(audit)
            return True

    def create_api_key(
        self, record: ApiKeyRecord, *, only_if_none: bool = False, audit: AuditEntry | None = None
    ) -> bool:
        with self._lock:
            keys = self._api_keys
            if (only_if_none and keys) or record.id in keys:
                return False
            if any(k.key_hash == record.key_hash for k in keys.values()):
                return False
            keys[record.id] = record
            self._append_audit(audit)
            return True

    def api_key_by_hash(self, key_hash: str) -> ApiKeyRecord | None:
        with self._lock:
            return next((k for k in self._api_keys.values() if k.key_hash == key_hash), None)

    def get_api_key(self, key_id: str) -> ApiKeyRecord | None:
        with self._lock:
            return self._api_keys.get(key_id)

    def list_api_keys(self, tenant: str | None = None) -> list[ApiKeyRecord]:
        with self._lock:
            found = [k for k in self._api_keys.values() if tenant is None or k.tenant == tenant]
        return sorted(found, key=lambda k: (k.created_at, k.id))

    def revoke_api_key(self, key_id: str, at: datetime, *, audit: AuditEntry | None = None) -> bool:
        with self._lock:
            keys = self._api_keys
            current = keys.get(key_id)
            if current is None:
                return False
            if current.revoked_at is None:
                keys[key_id] = replace(current, revoked_at=at)
            self._append_audit(audit)
            return True

    def touch_api_key(self, key_id: str, at: datetime) -> None:
        with self._lock:
            keys = self._api_keys
            if key_id in keys:
                keys[key_id] = replace(keys[key_id], last_used_at=at)

    def claim_idempotency_key(self, record: IdempotencyRecord) -> IdempotencyRecord:
        with self._lock:
            return self._idempotency_keys.setdefault((record.tenant, record.key), record)

    def purge_idempotency_keys(self, before: datetime) -> int:
        with self._lock:
            table = self._idempotency_keys
            old = [k for k, r in table.items() if r.created_at < before]
            for k in old:
                del table[k]
            return len(old)

    def revoke_session(self, session_id: str, until: datetime) -> None:
        with self._lock:
            known = self._revoked_sessions.get(session_id)
            self._revoked_sessions[session_id] = until if known is None else max(known, until)

    def session_revoked(self, session_id: str) -> bool:
        with self._lock:
            return session_id in self._revoked_sessions

    def purge_revoked_sessions(self, before: datetime) -> int:
        with self._lock:
            table = self._revoked_sessions
            old = [k for k, until in table.items() if until < before]
            for k in old:
                del table[k]
            return len(old)

    def get_tenant(self, tenant: str) -> TenantRecord | None:
        with self._lock:
            return self._tenants.get(tenant)

    def put_tenant(self, record: TenantRecord, *, audit: AuditEntry | None = None) -> None:
        with self._lock:
            self._tenants[record.tenant] = record
            self._append_audit(audit)

    def list_tenants(self) -> list[TenantRecord]:
        with self._lock:
            return [self._tenants[name] for name in sorted(self._tenants)]

    def quota_usage(self, tenant: str, day: date) -> dict[str, float]:
        with self._lock:
            return {
                budget: used
                for (t, budget, d), used in self._quota_usage.items()
                if t == tenant and d == day
            }

    def debit_quota(self, tenant: str, debits: Sequence[Debit]) -> Debit | None:
        with self._lock:
            for debit in debits:
                if not debit.allows(self._quota_usage.get((tenant, debit.budget, debit.day), 0.0)):
                    return debit
            self._add_debits(tenant, debits)
            return None

    def _check_quotas(self, *starts: NewExecution) -> None:
        """Raise `QuotaExceeded` when `starts` (those whose ids are new) may not all be
        created, each counting the ones before it (the caller holds the lock)."""
        used = dict(self._quota_usage)
        running: dict[str, int] = {}
        for new in starts:
            if (new.tenant, new.id) in self._executions:
                continue
            if new.max_running is not None:
                if new.tenant not in running:
                    running[new.tenant] = sum(
                        1
                        for r in self._executions.values()
                        if r.tenant == new.tenant and r.status == "running"
                    )
                if running[new.tenant] >= new.max_running:
                    raise running_refused(new.max_running)
            for debit in new.debits:
                key = (new.tenant, debit.budget, debit.day)
                if not debit.allows(used.get(key, 0.0)):
                    raise debit_refused(debit)
                used[key] = used.get(key, 0.0) + debit.amount
            if new.tenant in running and new.first_step.status == "running":
                running[new.tenant] += 1

    def _add_debits(self, tenant: str, debits: Sequence[Debit]) -> None:
        for debit in debits:
            key = (tenant, debit.budget, debit.day)
            self._quota_usage[key] = self._quota_usage.get(key, 0.0) + debit.amount
