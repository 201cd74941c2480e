"""Platform records and contracts: API keys, idempotency keys, signed-out UI sessions and
tenants (their settings, today the side-effect policy).

An API key row never holds the token, only its SHA-256 (`key_hash`) and a short display
prefix. An idempotency row binds a client's `Idempotency-Key` (per tenant) to the
fingerprint of the request body and the execution that request started, so a retry with
the same key and body finds the same execution. A revoked session row keeps a signed-out
web UI session's id until the session would have expired anyway. A tenant row holds what
an administrator set for a tenant (its side-effect policy and its quotas, as JSON); a
tenant with no row has the defaults. The quota ledger (`quota_usage`) holds what a tenant
used of each daily budget per UTC day; it is written only through the `debits` of the
writes that use it (`wovyr.store.records.Debit`).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, datetime
from typing import Any, Protocol

from wovyr.store.audit import AuditEntry
from wovyr.store.frozen import record
from wovyr.store.records import Debit

__all__ = [
    "ApiKeyRecord",
    "ApiKeyStore",
    "IdempotencyRecord",
    "IdempotencyStore",
    "McpServerRecord",
    "McpServerStore",
    "ProviderRecord",
    "ProviderStore",
    "ResponseCacheStore",
    "SessionStore",
    "TenantRecord",
    "TenantStore",
]


@record
class ApiKeyRecord:
    id: str
    tenant: str
    role: str
    name: str
    prefix: str  # the first characters of the token, for people to tell keys apart
    key_hash: str  # hex SHA-256 of the token
    created_at: datetime
    revoked_at: datetime | None = None
    last_used_at: datetime | None = None

    @property
    def revoked(self) -> bool:
        return self.revoked_at is not None


@record
class IdempotencyRecord:
    tenant: str
    key: str
    fingerprint: str  # hex SHA-256 of the canonical request body
    execution_id: str
    created_at: datetime


@record
class TenantRecord:
    tenant: str
    policy: dict[str, Any] | None  # the side-effect policy's JSON form; None: the default
    updated_at: datetime
    updated_by: str = ""  # who set it (a key id, or "cli" for the host's administrator)
    quotas: dict[str, Any] | None = None  # the quotas' JSON form; None: no quotas
    # Its execution payloads are stored sealed with its data key (`wovyr.store.sealing`).
    seal_payloads: bool = False
    # Its retention settings' JSON form (`wovyr.engine.retention`); None: keep everything.
    retention: dict[str, Any] | None = None


class ApiKeyStore(Protocol):
    def create_api_key(
        self, record: ApiKeyRecord, *, only_if_none: bool = False, audit: AuditEntry | None = None
    ) -> bool:
        """Insert; with `only_if_none`, only when the table holds no key at all (atomic, so
        two servers starting at once bootstrap one key). False when nothing was inserted.
        `audit` (here and below) is appended to the audit chain in the same transaction,
        when the write applies."""
        ...

    def api_key_by_hash(self, key_hash: str) -> ApiKeyRecord | None: ...

    def get_api_key(self, key_id: str) -> ApiKeyRecord | None: ...

    def list_api_keys(self, tenant: str | None = None) -> list[ApiKeyRecord]:
        """Keys of `tenant` (every tenant's when None), oldest first."""
        ...

    def revoke_api_key(self, key_id: str, at: datetime, *, audit: AuditEntry | None = None) -> bool:
        """Mark revoked (once: a second revoke keeps the first time); False if unknown."""
        ...

    def touch_api_key(self, key_id: str, at: datetime) -> None:
        """Record a use (`last_used_at`)."""
        ...


class IdempotencyStore(Protocol):
    def claim_idempotency_key(self, record: IdempotencyRecord) -> IdempotencyRecord:
        """Insert `record` unless (tenant, key) exists; return the row that holds the key
        now (the given one, or the one stored first)."""
        ...

    def purge_idempotency_keys(self, before: datetime) -> int:
        """Forget keys created before `before`; return how many."""
        ...


class SessionStore(Protocol):
    def revoke_session(self, session_id: str, until: datetime) -> None:
        """Remember that `session_id` was signed out (until `until`, when it expires anyway);
        revoking again keeps the later `until`."""
        ...

    def session_revoked(self, session_id: str) -> bool:
        """Whether `session_id` was signed out (and not purged yet)."""
        ...

    def purge_revoked_sessions(self, before: datetime) -> int:
        """Forget sessions whose `until` is before `before`; return how many."""
        ...


class TenantStore(Protocol):
    def get_tenant(self, tenant: str) -> TenantRecord | None:
        """What is set for `tenant`; None when nothing is."""
        ...

    def put_tenant(self, record: TenantRecord, *, audit: AuditEntry | None = None) -> None:
        """Insert or replace the row of `record.tenant`."""
        ...

    def list_tenants(self) -> list[TenantRecord]:
        """Every tenant with settings, by name."""
        ...

    def quota_usage(self, tenant: str, day: date) -> dict[str, float]:
        """What `tenant` used of each budget on UTC `day` (budgets it never used: absent)."""
        ...

    def debit_quota(self, tenant: str, debits: Sequence[Debit]) -> Debit | None:
        """Add `debits` to `tenant`'s ledger in a transaction of their own, each checked
        against its limit as a start's are (check and addition one statement): None when
        all were added, else the first one a limit refused, and nothing is added."""
        ...


class ResponseCacheStore(Protocol):
    """The per-tenant memo of model responses (`llm` with `cache: true`): a response stored
    under the hash of its request (provider, model, messages, parameters) answers the same
    request again. Another tenant's entry answers exactly like a missing one."""

    def get_cached_response(self, tenant: str, key: str) -> dict[str, Any] | None:
        """The response stored for `key` in `tenant`, or None."""
        ...

    def put_cached_response(
        self, tenant: str, key: str, response: dict[str, Any], at: datetime
    ) -> None:
        """Store `response` for `key` unless one is stored (the first one stays)."""
        ...


@record
class ProviderRecord:
    """A tenant's model provider: an OpenAI-compatible endpoint, the NAME of the tenant's
    secret that holds its API key (never a value), and prices per 1M tokens."""

    tenant: str
    name: str
    base_url: str
    api_key_secret: str | None
    default_model: str | None
    price_in: float | None
    price_out: float | None
    updated_at: datetime
    updated_by: str = ""
    # the protocol it speaks: openai (chat completions), anthropic (Messages) or
    # openai-responses (OpenAI's Responses API)
    kind: str = "openai"
    options: dict[str, Any] | None = None  # provider parameters sent with every call
    prices: dict[str, Any] | None = None  # per model: {input, output} per 1M tokens
    # how an `openai` provider is sent an answer's token limit (None: by its host's rule)
    token_limit: str | None = None


class ProviderStore(Protocol):
    """Tenants' model providers. Another tenant's provider answers exactly like a missing
    one."""

    def put_provider(self, record: ProviderRecord, *, audit: AuditEntry | None = None) -> None:
        """Insert or replace the row of (`record.tenant`, `record.name`)."""
        ...

    def get_provider(self, tenant: str, name: str) -> ProviderRecord | None: ...

    def list_providers(self, tenant: str) -> list[ProviderRecord]:
        """`tenant`'s providers, by name."""
        ...

    def delete_provider(self, tenant: str, name: str, *, audit: AuditEntry | None = None) -> bool:
        """False if `tenant` has no provider `name`."""
        ...


@record
class McpServerRecord:
    """A tenant's MCP server: `stdio` (a program the worker starts: `command`, its argv) or
    `http` (a streamable-HTTP endpoint: `url`). `header_secrets` maps an HTTP header to the
    NAME of the tenant's secret whose value is sent in it (never a value)."""

    tenant: str
    name: str
    transport: str  # "stdio" or "http"
    command: tuple[str, ...] | None
    url: str | None
    header_secrets: dict[str, str]
    updated_at: datetime
    updated_by: str = ""


class McpServerStore(Protocol):
    """Tenants' MCP servers. Another tenant's server answers exactly like a missing one."""

    def put_mcp_server(self, record: McpServerRecord, *, audit: AuditEntry | None = None) -> None:
        """Insert or replace the row of (`record.tenant`, `record.name`)."""
        ...

    def get_mcp_server(self, tenant: str, name: str) -> McpServerRecord | None: ...

    def list_mcp_servers(self, tenant: str) -> list[McpServerRecord]:
        """`tenant`'s MCP servers, by name."""
        ...

    def delete_mcp_server(self, tenant: str, name: str, *, audit: AuditEntry | None = None) -> bool:
        """False if `tenant` has no MCP server `name`."""
        ...
