"""The platform half of the PostgreSQL store (API keys, idempotency keys, revoked sessions,
tenants; mixed into PostgresStore). Its SQL lives in `platform.sql`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import date, datetime
from functools import cache
from importlib import resources
from typing import Any

from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from wovyr.errors import QuotaExceeded
from wovyr.store.audit import AuditEntry
from wovyr.store.platform import (
    ApiKeyRecord,
    IdempotencyRecord,
    McpServerRecord,
    ProviderRecord,
    TenantRecord,
)
from wovyr.store.postgres.audit import append_audit_row
from wovyr.store.postgres.queries import parse_queries
from wovyr.store.postgres.support import Connection
from wovyr.store.quotas import debit_refused, running_refused
from wovyr.store.records import Debit, NewExecution
from wovyr.store.rows import (
    POSTGRES,
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

__all__ = ["PostgresPlatform"]


@cache
def _queries() -> dict[str, str]:
    text = (resources.files("wovyr.store.postgres") / "platform.sql").read_text(encoding="utf-8")
    return parse_queries(text)


class PostgresPlatform:
    """Needs `_write()` and `_run()` from PostgresStore."""

    _write: Callable[[Callable[[Connection], Any]], Any]
    _run: Callable[..., Any]

    def _api_keys(self, name: str, params: dict[str, Any]) -> list[ApiKeyRecord]:
        sql = _queries()[name]

        def body(conn: Connection) -> list[Any]:
            return conn.cursor(row_factory=dict_row).execute(sql, params).fetchall()

        rows: list[Any] = self._run(body, write=False)
        return [api_key_record(row, POSTGRES) for row in rows]

    def _platform_write(
        self, name: str, params: dict[str, Any], audit: AuditEntry | None = None
    ) -> int:
        """One statement in a transaction; `audit` is appended in it when a row changed."""
        sql = _queries()[name]

        def body(conn: Connection) -> int:
            count = conn.execute(sql, params).rowcount
            if count:
                append_audit_row(conn, audit)
            return count

        return int(self._write(body))

    # --- API keys ------------------------------------------------------------------------

    def create_api_key(
        self, record: ApiKeyRecord, *, only_if_none: bool = False, audit: AuditEntry | None = None
    ) -> bool:
        q, params = _queries(), api_key_params(record, POSTGRES)

        def body(conn: Connection) -> bool:
            if only_if_none:
                conn.execute(q["api_key_lock"])
                if conn.execute(q["api_key_any"]).fetchone() is not None:
                    return False
            if conn.execute(q["api_key_insert"], params).rowcount != 1:
                return False
            append_audit_row(conn, audit)
            return True

        return bool(self._write(body))

    def api_key_by_hash(self, key_hash: str) -> ApiKeyRecord | None:
        found = self._api_keys("api_key_by_hash", {"key_hash": key_hash})
        return found[0] if found else None

    def get_api_key(self, key_id: str) -> ApiKeyRecord | None:
        found = self._api_keys("api_key_get", {"id": key_id})
        return found[0] if found else None

    def list_api_keys(self, tenant: str | None = None) -> list[ApiKeyRecord]:
        return self._api_keys("api_key_list", {"tenant": tenant})

    def revoke_api_key(self, key_id: str, at: datetime, *, audit: AuditEntry | None = None) -> bool:
        return self._platform_write("api_key_revoke", {"id": key_id, "at": at}, audit) == 1

    def touch_api_key(self, key_id: str, at: datetime) -> None:
        self._platform_write("api_key_touch", {"id": key_id, "at": at})

    # --- idempotency keys ----------------------------------------------------------------

    def claim_idempotency_key(self, record: IdempotencyRecord) -> IdempotencyRecord:
        q, params = _queries(), idempotency_params(record, POSTGRES)

        def body(conn: Connection) -> Any:
            named = conn.cursor(row_factory=dict_row)
            row = named.execute(q["idempotency_claim"], params).fetchone()
            if row is None:
                # A concurrent claim committed after this statement's snapshot was taken:
                # a new statement sees its row.
                row = named.execute(
                    "SELECT tenant, key, fingerprint, execution_id, created_at"
                    " FROM idempotency_keys WHERE tenant = %(tenant)s AND key = %(key)s",
                    params,
                ).fetchone()
            return row

        row = self._write(body)
        return idempotency_record(row, POSTGRES)

    def purge_idempotency_keys(self, before: datetime) -> int:
        return self._platform_write("idempotency_purge", {"before": before})

    # --- revoked UI sessions -------------------------------------------------------------

    def revoke_session(self, session_id: str, until: datetime) -> None:
        self._platform_write("session_revoke", {"session_id": session_id, "until": until})

    def session_revoked(self, session_id: str) -> bool:
        sql = _queries()["session_revoked"]

        def body(conn: Connection) -> bool:
            return conn.execute(sql, {"session_id": session_id}).fetchone() is not None

        return bool(self._run(body, write=False))

    def purge_revoked_sessions(self, before: datetime) -> int:
        return self._platform_write("session_purge", {"before": before})

    # --- cached model responses ------------------------------------------------------------

    def get_cached_response(self, tenant: str, key: str) -> dict[str, Any] | None:
        sql = _queries()["response_get"]

        def body(conn: Connection) -> Any:
            return conn.execute(sql, {"tenant": tenant, "key": key}).fetchone()

        row = self._run(body, write=False)
        return dict(row[0]) if row is not None else None

    def put_cached_response(
        self, tenant: str, key: str, response: dict[str, Any], at: datetime
    ) -> None:
        params = {"tenant": tenant, "key": key, "response": Jsonb(response), "at": at}
        self._platform_write("response_put", params)

    # --- model providers -------------------------------------------------------------------

    def _providers(self, name: str, params: dict[str, Any]) -> list[ProviderRecord]:
        sql = _queries()[name]

        def body(conn: Connection) -> list[Any]:
            return conn.cursor(row_factory=dict_row).execute(sql, params).fetchall()

        rows: list[Any] = self._run(body, write=False)
        return [provider_record(row, POSTGRES) for row in rows]

    def put_provider(self, record: ProviderRecord, *, audit: AuditEntry | None = None) -> None:
        self._platform_write("provider_put", provider_params(record, POSTGRES), audit)

    def get_provider(self, tenant: str, name: str) -> ProviderRecord | None:
        found = self._providers("provider_get", {"tenant": tenant, "name": name})
        return found[0] if found else None

    def list_providers(self, tenant: str) -> list[ProviderRecord]:
        return self._providers("provider_list", {"tenant": tenant})

    def delete_provider(self, tenant: str, name: str, *, audit: AuditEntry | None = None) -> bool:
        params = {"tenant": tenant, "name": name}
        return self._platform_write("provider_delete", params, audit) == 1

    # --- MCP servers -----------------------------------------------------------------------

    def _mcp_servers(self, name: str, params: dict[str, Any]) -> list[McpServerRecord]:
        sql = _queries()[name]

        def body(conn: Connection) -> list[Any]:
            return conn.cursor(row_factory=dict_row).execute(sql, params).fetchall()

        rows: list[Any] = self._run(body, write=False)
        return [mcp_server_record(row, POSTGRES) for row in rows]

    def put_mcp_server(self, record: McpServerRecord, *, audit: AuditEntry | None = None) -> None:
        self._platform_write("mcp_server_put", mcp_server_params(record, POSTGRES), audit)

    def get_mcp_server(self, tenant: str, name: str) -> McpServerRecord | None:
        found = self._mcp_servers("mcp_server_get", {"tenant": tenant, "name": name})
        return found[0] if found else None

    def list_mcp_servers(self, tenant: str) -> list[McpServerRecord]:
        return self._mcp_servers("mcp_server_list", {"tenant": tenant})

    def delete_mcp_server(self, tenant: str, name: str, *, audit: AuditEntry | None = None) -> bool:
        params = {"tenant": tenant, "name": name}
        return self._platform_write("mcp_server_delete", params, audit) == 1

    # --- tenants ---------------------------------------------------------------------------

    def _tenants(self, name: str, params: dict[str, Any]) -> list[TenantRecord]:
        sql = _queries()[name]

        def body(conn: Connection) -> list[Any]:
            return conn.cursor(row_factory=dict_row).execute(sql, params).fetchall()

        rows: list[Any] = self._run(body, write=False)
        return [tenant_record(row, POSTGRES) for row in rows]

    def get_tenant(self, tenant: str) -> TenantRecord | None:
        found = self._tenants("tenant_get", {"tenant": tenant})
        return found[0] if found else None

    def put_tenant(self, record: TenantRecord, *, audit: AuditEntry | None = None) -> None:
        self._platform_write("tenant_put", tenant_params(record, POSTGRES), audit)

    def list_tenants(self) -> list[TenantRecord]:
        return self._tenants("tenant_list", {})

    def quota_usage(self, tenant: str, day: date) -> dict[str, float]:
        sql = _queries()["quota_usage"]

        def body(conn: Connection) -> list[Any]:
            return conn.execute(sql, {"tenant": tenant, "day": day}).fetchall()

        rows: list[Any] = self._run(body, write=False)
        return {row[0]: float(row[1]) for row in rows}

    def debit_quota(self, tenant: str, debits: Sequence[Debit]) -> Debit | None:
        refused: list[Debit] = []

        def body(conn: Connection) -> None:
            for debit in debits:
                refused[:] = [debit]
                self._debit(conn, tenant, (debit,))  # a refusal rolls all back

        try:
            self._write(body)
        except QuotaExceeded:
            return refused[0]
        return None

    # --- quotas (inside the transaction of the write they guard) ---------------------------

    @staticmethod
    def _debit(
        conn: Connection, tenant: str, debits: Sequence[Debit], *, checked: bool = True
    ) -> None:
        """Add `debits` to the ledger; when `checked`, one its limit refuses raises
        `QuotaExceeded` (the caller's transaction is rolled back). The check is the upsert's
        own condition, evaluated on the row it locks: concurrent debits queue on that lock,
        so two servers never both take the last unit."""
        sql = _queries()["quota_debit"]
        for debit in debits:
            limit = debit.limit if checked else None
            if limit is not None and not debit.allows(0.0):
                raise debit_refused(debit)
            params = {
                "tenant": tenant,
                "budget": debit.budget,
                "day": debit.day,
                "amount": debit.amount,
                "limit": limit,
            }
            if conn.execute(sql, params).fetchone() is None:
                raise debit_refused(debit)

    @classmethod
    def _check_start(cls, conn: Connection, new: NewExecution) -> None:
        """The quotas of `new`, just inserted in this transaction: the running count (under
        a per-tenant transaction lock, so concurrent starts count one after the other), then
        the debits."""
        if new.max_running is not None:
            queries = _queries()
            conn.execute(queries["running_lock"], {"tenant": new.tenant})
            row = conn.execute(queries["running_count"], {"tenant": new.tenant}).fetchone()
            running = int(row[0]) if row else 0
            running -= 1 if new.first_step.status == "running" else 0  # itself
            if running >= new.max_running:
                raise running_refused(new.max_running)
        cls._debit(conn, new.tenant, new.debits)
