-- Schema version 5: API keys (only their SHA-256 is kept) and idempotency keys of the HTTP API.
CREATE TABLE api_keys (
    id           text PRIMARY KEY,
    tenant       text NOT NULL,
    role         text NOT NULL,
    name         text NOT NULL,
    prefix       text NOT NULL,
    key_hash     text NOT NULL UNIQUE,
    created_at   timestamptz NOT NULL,
    revoked_at   timestamptz,
    last_used_at timestamptz
);
CREATE INDEX api_keys_by_tenant ON api_keys (tenant, created_at);
CREATE TABLE idempotency_keys (
    tenant       text NOT NULL,
    key          text NOT NULL,
    fingerprint  text NOT NULL,
    execution_id text NOT NULL,
    created_at   timestamptz NOT NULL,
    PRIMARY KEY (tenant, key)
);
CREATE INDEX idempotency_keys_by_age ON idempotency_keys (created_at);
