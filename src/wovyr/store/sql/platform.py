"""The platform tables of both SQL stores (the contract is `wovyr.store.platform`): API
keys, idempotency keys, revoked UI sessions, cached model responses, model providers, MCP
servers, tenants. Its SQL lives in `platform.sql`. The quota ledger is a role of its own
(`wovyr.store.sql.quotas`): it is written inside the store's start transaction."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, TypeVar

from wovyr.store.audit import AuditEntry
from wovyr.store.platform import (
    ApiKeyRecord,
    IdempotencyRecord,
    McpServerRecord,
    ProviderRecord,
    TenantRecord,
)
from wovyr.store.rows import Row, from_row, mcp_server_params, mcp_server_record, to_params
from wovyr.store.sql import Params, SQLRole, Tx

__all__ = ["SQLPlatform"]

_R = TypeVar("_R")


class SQLPlatform(SQLRole):
    def _records(self, name: str, params: Params, cls: type[_R]) -> list[_R]:
        return self._role_records("platform", name, params, cls)

    def _mcp_servers(self, name: str, params: Params) -> list[McpServerRecord]:
        rows = self._sql_read(self._queries("platform")[name], params)
        return [mcp_server_record(row, self._dialect) for row in rows]

    def _platform_write(self, name: str, params: Params, audit: AuditEntry | None = None) -> int:
        return self._role_write("platform", name, params, audit)

    # --- API keys ------------------------------------------------------------------------

    def create_api_key(
        self, record: ApiKeyRecord, *, only_if_none: bool = False, audit: AuditEntry | None = None
    ) -> bool:
        q, params = self._queries("platform"), to_params(record, self._dialect)

        def body(tx: Tx) -> bool:
            if only_if_none:  # the emptiness check cannot race (a lock, BEGIN IMMEDIATE)
                if "api_key_lock" in q:
                    tx.rows(q["api_key_lock"], {})
                if tx.rows(q["api_key_any"], {}):
                    return False
            if tx.run(q["api_key_insert"], params) != 1:
                return False
            tx.append_audit(audit)
            return True

        return bool(self._sql_write(body))

    def api_key_by_hash(self, key_hash: str) -> ApiKeyRecord | None:
        found = self._records("api_key_by_hash", {"key_hash": key_hash}, ApiKeyRecord)
        return found[0] if found else None

    def get_api_key(self, key_id: str) -> ApiKeyRecord | None:
        found = self._records("api_key_get", {"id": key_id}, ApiKeyRecord)
        return found[0] if found else None

    def list_api_keys(self, tenant: str | None = None) -> list[ApiKeyRecord]:
        if tenant is None:
            return self._records("api_key_list", {}, ApiKeyRecord)
        return self._records("api_key_list_tenant", {"tenant": tenant}, ApiKeyRecord)

    def revoke_api_key(self, key_id: str, at: datetime, *, audit: AuditEntry | None = None) -> bool:
        params = {"id": key_id, "at": self._dialect.timestamp(at)}
        return self._platform_write("api_key_revoke", params, audit) == 1

    def touch_api_key(self, key_id: str, at: datetime) -> None:
        self._platform_write("api_key_touch", {"id": key_id, "at": self._dialect.timestamp(at)})

    # --- idempotency keys ----------------------------------------------------------------

    def claim_idempotency_key(self, record: IdempotencyRecord) -> IdempotencyRecord:
        q, params = self._queries("platform"), to_params(record, self._dialect)

        def body(tx: Tx) -> Row:
            # the row that holds the key, inserted or not; a claim that committed after
            # the first statement's snapshot was taken is seen by the second
            return (
                tx.rows(q["idempotency_claim"], params) or tx.rows(q["idempotency_get"], params)
            )[0]

        return from_row(IdempotencyRecord, self._sql_write(body), self._dialect)

    def purge_idempotency_keys(self, before: datetime) -> int:
        return self._platform_write(
            "idempotency_purge", {"before": self._dialect.timestamp(before)}
        )

    # --- revoked UI sessions -------------------------------------------------------------

    def revoke_session(self, session_id: str, until: datetime) -> None:
        params = {"session_id": session_id, "until": self._dialect.timestamp(until)}
        self._platform_write("session_revoke", params)

    def session_revoked(self, session_id: str) -> bool:
        sql = self._queries("platform")["session_revoked"]
        return bool(self._sql_read(sql, {"session_id": session_id}))

    def purge_revoked_sessions(self, before: datetime) -> int:
        return self._platform_write("session_purge", {"before": self._dialect.timestamp(before)})

    # --- cached model responses ------------------------------------------------------------

    def get_cached_response(self, tenant: str, key: str) -> dict[str, Any] | None:
        sql = self._queries("platform")["response_get"]
        rows = self._sql_read(sql, {"tenant": tenant, "key": key})
        return dict(self._dialect.json(rows[0]["response"])) if rows else None

    def put_cached_response(
        self, tenant: str, key: str, response: dict[str, Any], at: datetime
    ) -> None:
        params = {
            "tenant": tenant,
            "key": key,
            "response": json.dumps(response, separators=(",", ":")),
            "at": self._dialect.timestamp(at),
        }
        self._platform_write("response_put", params)

    # --- model providers -------------------------------------------------------------------

    def put_provider(self, record: ProviderRecord, *, audit: AuditEntry | None = None) -> None:
        self._platform_write("provider_put", to_params(record, self._dialect), audit)

    def get_provider(self, tenant: str, name: str) -> ProviderRecord | None:
        params = {"tenant": tenant, "name": name}
        found = self._records("provider_get", params, ProviderRecord)
        return found[0] if found else None

    def list_providers(self, tenant: str) -> list[ProviderRecord]:
        return self._records("provider_list", {"tenant": tenant}, ProviderRecord)

    def delete_provider(self, tenant: str, name: str, *, audit: AuditEntry | None = None) -> bool:
        params = {"tenant": tenant, "name": name}
        return self._platform_write("provider_delete", params, audit) == 1

    # --- MCP servers -----------------------------------------------------------------------

    def put_mcp_server(self, record: McpServerRecord, *, audit: AuditEntry | None = None) -> None:
        self._platform_write("mcp_server_put", mcp_server_params(record, self._dialect), audit)

    def get_mcp_server(self, tenant: str, name: str) -> McpServerRecord | None:
        params = {"tenant": tenant, "name": name}
        found = self._mcp_servers("mcp_server_get", params)
        return found[0] if found else None

    def list_mcp_servers(self, tenant: str) -> list[McpServerRecord]:
        return self._mcp_servers("mcp_server_list", {"tenant": tenant})

    def delete_mcp_server(self, tenant: str, name: str, *, audit: AuditEntry | None = None) -> bool:
        params = {"tenant": tenant, "name": name}
        return self._platform_write("mcp_server_delete", params, audit) == 1

    # --- tenants ---------------------------------------------------------------------------

    def get_tenant(self, tenant: str) -> TenantRecord | None:
        found = self._records("tenant_get", {"tenant": tenant}, TenantRecord)
        return found[0] if found else None

    def put_tenant(self, record: TenantRecord, *, audit: AuditEntry | None = None) -> None:
        self._platform_write("tenant_put", to_params(record, self._dialect), audit)

    def list_tenants(self) -> list[TenantRecord]:
        return self._records("tenant_list", {}, TenantRecord)
