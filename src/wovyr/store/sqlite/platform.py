"""The platform half of the SQLite store (API keys, idempotency keys, revoked sessions,
tenants; mixed into SQLiteStore)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from datetime import date, datetime
from typing import Any

from wovyr.errors import QuotaExceeded
from wovyr.store.audit import AuditEntry
from wovyr.store.codec import to_micros
from wovyr.store.platform import (
    ApiKeyRecord,
    IdempotencyRecord,
    McpServerRecord,
    ProviderRecord,
    TenantRecord,
)
from wovyr.store.quotas import debit_refused, running_refused
from wovyr.store.records import Debit, NewExecution
from wovyr.store.rows import (
    SQLITE,
    api_key_params,
    api_key_record,
    idempotency_params,
    idempotency_record,
    mcp_server_params,
    mcp_server_record,
    provider_params,
    provider_record,
    tenant_params,
    tenant_record,
)
from wovyr.store.sqlite.audit import append_audit_row

__all__ = ["SQLitePlatform"]

_TENANT_COLUMNS = "tenant, policy, updated_at, updated_by, quotas, seal_payloads, retention"
_KEY_COLUMNS = "id, tenant, role, name, prefix, key_hash, created_at, revoked_at, last_used_at"
_KEY_VALUES = ", ".join(f":{c.strip()}" for c in _KEY_COLUMNS.split(","))
_PROVIDER = (
    "tenant, name, base_url, api_key_secret, default_model, price_in, price_out,"
    " updated_at, updated_by, kind"
)
_MCP = "tenant, name, transport, command, url, header_secrets, updated_at, updated_by"
_MCP_VALUES = ", ".join(f":{c.strip()}" for c in _MCP.split(","))
_PROVIDER_VALUES = ", ".join(f":{c.strip()}" for c in _PROVIDER.split(","))


class SQLitePlatform:
    """Needs `_write()` and `_read()` from SQLiteStore."""

    _write: Callable[[], AbstractContextManager[sqlite3.Connection]]
    _read: Callable[..., list[Any]]

    # --- API keys ------------------------------------------------------------------------

    def create_api_key(
        self, record: ApiKeyRecord, *, only_if_none: bool = False, audit: AuditEntry | None = None
    ) -> bool:
        params = api_key_params(record, SQLITE)
        with self._write() as conn:  # BEGIN IMMEDIATE: the emptiness check cannot race
            if only_if_none and conn.execute("SELECT 1 FROM api_keys LIMIT 1").fetchone():
                return False
            cur = conn.execute(
                f"INSERT OR IGNORE INTO api_keys ({_KEY_COLUMNS}) VALUES ({_KEY_VALUES})", params
            )
            if cur.rowcount != 1:
                return False
            append_audit_row(conn, audit)
            return True

    def api_key_by_hash(self, key_hash: str) -> ApiKeyRecord | None:
        rows = self._read(f"SELECT {_KEY_COLUMNS} FROM api_keys WHERE key_hash = ?", (key_hash,))
        return api_key_record(rows[0], SQLITE) if rows else None

    def get_api_key(self, key_id: str) -> ApiKeyRecord | None:
        rows = self._read(f"SELECT {_KEY_COLUMNS} FROM api_keys WHERE id = ?", (key_id,))
        return api_key_record(rows[0], SQLITE) if rows else None

    def list_api_keys(self, tenant: str | None = None) -> list[ApiKeyRecord]:
        if tenant is None:
            rows = self._read(f"SELECT {_KEY_COLUMNS} FROM api_keys ORDER BY created_at, id")
        else:
            rows = self._read(
                f"SELECT {_KEY_COLUMNS} FROM api_keys WHERE tenant = ? ORDER BY created_at, id",
                (tenant,),
            )
        return [api_key_record(r, SQLITE) for r in rows]

    def revoke_api_key(self, key_id: str, at: datetime, *, audit: AuditEntry | None = None) -> bool:
        with self._write() as conn:
            cur = conn.execute(
                "UPDATE api_keys SET revoked_at = coalesce(revoked_at, ?) WHERE id = ?",
                (to_micros(at), key_id),
            )
            if cur.rowcount != 1:
                return False
            append_audit_row(conn, audit)
            return True

    def touch_api_key(self, key_id: str, at: datetime) -> None:
        with self._write() as conn:
            conn.execute(
                "UPDATE api_keys SET last_used_at = ? WHERE id = ?", (to_micros(at), key_id)
            )

    # --- idempotency keys ----------------------------------------------------------------

    def claim_idempotency_key(self, record: IdempotencyRecord) -> IdempotencyRecord:
        with self._write() as conn:
            conn.execute(
                "INSERT OR IGNORE INTO idempotency_keys"
                " (tenant, key, fingerprint, execution_id, created_at)"
                " VALUES (:tenant, :key, :fingerprint, :execution_id, :created_at)",
                idempotency_params(record, SQLITE),
            )
            row = conn.execute(
                "SELECT tenant, key, fingerprint, execution_id, created_at FROM idempotency_keys"
                " WHERE tenant = ? AND key = ?",
                (record.tenant, record.key),
            ).fetchone()
        return idempotency_record(row, SQLITE)

    def purge_idempotency_keys(self, before: datetime) -> int:
        with self._write() as conn:
            return conn.execute(
                "DELETE FROM idempotency_keys WHERE created_at < ?", (to_micros(before),)
            ).rowcount

    # --- revoked UI sessions -------------------------------------------------------------

    def revoke_session(self, session_id: str, until: datetime) -> None:
        with self._write() as conn:
            conn.execute(
                "INSERT INTO revoked_sessions (session_id, until) VALUES (?, ?)"
                " ON CONFLICT (session_id) DO UPDATE SET until = max(until, excluded.until)",
                (session_id, to_micros(until)),
            )

    def session_revoked(self, session_id: str) -> bool:
        return bool(
            self._read("SELECT 1 FROM revoked_sessions WHERE session_id = ?", (session_id,))
        )

    def purge_revoked_sessions(self, before: datetime) -> int:
        with self._write() as conn:
            return conn.execute(
                "DELETE FROM revoked_sessions WHERE until < ?", (to_micros(before),)
            ).rowcount

    # --- cached model responses ------------------------------------------------------------

    def get_cached_response(self, tenant: str, key: str) -> dict[str, Any] | None:
        rows = self._read(
            "SELECT response FROM llm_responses WHERE tenant = ? AND request_hash = ?",
            (tenant, key),
        )
        return dict(json.loads(rows[0][0])) if rows else None

    def put_cached_response(
        self, tenant: str, key: str, response: dict[str, Any], at: datetime
    ) -> None:
        with self._write() as conn:
            conn.execute(
                "INSERT INTO llm_responses (tenant, request_hash, response, created_at)"
                " VALUES (?, ?, ?, ?) ON CONFLICT (tenant, request_hash) DO NOTHING",
                (tenant, key, json.dumps(response, separators=(",", ":")), to_micros(at)),
            )

    # --- model providers -------------------------------------------------------------------

    def put_provider(self, record: ProviderRecord, *, audit: AuditEntry | None = None) -> None:
        with self._write() as conn:
            conn.execute(
                f"INSERT INTO providers ({_PROVIDER}) VALUES ({_PROVIDER_VALUES})"
                " ON CONFLICT (tenant, name) DO UPDATE SET base_url = excluded.base_url,"
                " api_key_secret = excluded.api_key_secret,"
                " default_model = excluded.default_model, price_in = excluded.price_in,"
                " price_out = excluded.price_out, updated_at = excluded.updated_at,"
                " updated_by = excluded.updated_by, kind = excluded.kind",
                provider_params(record, SQLITE),
            )
            append_audit_row(conn, audit)

    def get_provider(self, tenant: str, name: str) -> ProviderRecord | None:
        rows = self._read(
            f"SELECT {_PROVIDER} FROM providers WHERE tenant = ? AND name = ?", (tenant, name)
        )
        return provider_record(rows[0], SQLITE) if rows else None

    def list_providers(self, tenant: str) -> list[ProviderRecord]:
        rows = self._read(
            f"SELECT {_PROVIDER} FROM providers WHERE tenant = ? ORDER BY name", (tenant,)
        )
        return [provider_record(r, SQLITE) for r in rows]

    def delete_provider(self, tenant: str, name: str, *, audit: AuditEntry | None = None) -> bool:
        with self._write() as conn:
            cur = conn.execute(
                "DELETE FROM providers WHERE tenant = ? AND name = ?", (tenant, name)
            )
            if cur.rowcount != 1:
                return False
            append_audit_row(conn, audit)
            return True

    # --- MCP servers -----------------------------------------------------------------------

    def put_mcp_server(self, record: McpServerRecord, *, audit: AuditEntry | None = None) -> None:
        with self._write() as conn:
            conn.execute(
                f"INSERT INTO mcp_servers ({_MCP}) VALUES ({_MCP_VALUES})"
                " ON CONFLICT (tenant, name) DO UPDATE SET transport = excluded.transport,"
                " command = excluded.command, url = excluded.url,"
                " header_secrets = excluded.header_secrets, updated_at = excluded.updated_at,"
                " updated_by = excluded.updated_by",
                mcp_server_params(record, SQLITE),
            )
            append_audit_row(conn, audit)

    def get_mcp_server(self, tenant: str, name: str) -> McpServerRecord | None:
        rows = self._read(
            f"SELECT {_MCP} FROM mcp_servers WHERE tenant = ? AND name = ?", (tenant, name)
        )
        return mcp_server_record(rows[0], SQLITE) if rows else None

    def list_mcp_servers(self, tenant: str) -> list[McpServerRecord]:
        rows = self._read(
            f"SELECT {_MCP} FROM mcp_servers WHERE tenant = ? ORDER BY name", (tenant,)
        )
        return [mcp_server_record(r, SQLITE) for r in rows]

    def delete_mcp_server(self, tenant: str, name: str, *, audit: AuditEntry | None = None) -> bool:
        with self._write() as conn:
            cur = conn.execute(
                "DELETE FROM mcp_servers WHERE tenant = ? AND name = ?", (tenant, name)
            )
            if cur.rowcount != 1:
                return False
            append_audit_row(conn, audit)
            return True

    # --- tenants ---------------------------------------------------------------------------

    def get_tenant(self, tenant: str) -> TenantRecord | None:
        rows = self._read(
            f"SELECT {_TENANT_COLUMNS} FROM tenants WHERE tenant = ?",
            (tenant,),
        )
        return tenant_record(rows[0], SQLITE) if rows else None

    def put_tenant(self, record: TenantRecord, *, audit: AuditEntry | None = None) -> None:
        with self._write() as conn:
            conn.execute(
                "INSERT INTO tenants (tenant, policy, updated_at, updated_by, quotas,"
                " seal_payloads, retention)"
                " VALUES (:tenant, :policy, :updated_at, :updated_by, :quotas, :seal_payloads,"
                " :retention)"
                " ON CONFLICT (tenant) DO UPDATE SET policy = excluded.policy,"
                " updated_at = excluded.updated_at, updated_by = excluded.updated_by,"
                " quotas = excluded.quotas, seal_payloads = excluded.seal_payloads,"
                " retention = excluded.retention",
                tenant_params(record, SQLITE),
            )
            append_audit_row(conn, audit)

    def list_tenants(self) -> list[TenantRecord]:
        rows = self._read(f"SELECT {_TENANT_COLUMNS} FROM tenants ORDER BY tenant")
        return [tenant_record(r, SQLITE) for r in rows]

    def quota_usage(self, tenant: str, day: date) -> dict[str, float]:
        rows = self._read(
            "SELECT budget, used FROM quota_usage WHERE tenant = ? AND day = ?",
            (tenant, day.isoformat()),
        )
        return {row[0]: float(row[1]) for row in rows}

    def debit_quota(self, tenant: str, debits: Sequence[Debit]) -> Debit | None:
        refused: list[Debit] = []
        try:
            with self._write() as conn:
                for debit in debits:
                    refused[:] = [debit]
                    self._debit(conn, tenant, (debit,))  # a refusal rolls all back
        except QuotaExceeded:
            return refused[0]
        return None

    # --- quotas (inside the transaction of the write they guard) ---------------------------

    @staticmethod
    def _debit(
        conn: sqlite3.Connection, tenant: str, debits: Sequence[Debit], *, checked: bool = True
    ) -> None:
        """Add `debits` to the ledger; when `checked`, one its limit refuses raises
        `QuotaExceeded` (and the caller's transaction is rolled back)."""
        for debit in debits:
            limit = debit.limit if checked else None
            if limit is not None and not debit.allows(0.0):
                raise debit_refused(debit)
            cur = conn.execute(
                "INSERT INTO quota_usage (tenant, budget, day, used)"
                " VALUES (:tenant, :budget, :day, :amount)"
                " ON CONFLICT (tenant, budget, day) DO UPDATE SET used = used + excluded.used"
                " WHERE :limit IS NULL OR (used + excluded.used <= :limit AND used < :limit)",
                {
                    "tenant": tenant,
                    "budget": debit.budget,
                    "day": debit.day.isoformat(),
                    "amount": debit.amount,
                    "limit": limit,
                },
            )
            if cur.rowcount != 1:
                raise debit_refused(debit)

    @classmethod
    def _check_start(cls, conn: sqlite3.Connection, new: NewExecution) -> None:
        """The quotas of `new`, just inserted: the running count, then the debits."""
        if new.max_running is not None:
            row = conn.execute(
                "SELECT count(*) FROM executions WHERE tenant = ? AND status = 'running'"
                " AND id != ?",
                (new.tenant, new.id),
            ).fetchone()
            if int(row[0]) >= new.max_running:
                raise running_refused(new.max_running)
        cls._debit(conn, new.tenant, new.debits)
