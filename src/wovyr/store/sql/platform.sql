-- The platform tables (wovyr.store.platform): API keys, idempotency keys, revoked UI
-- sessions, cached model responses, model providers, MCP servers, tenants. The quota ledger
-- stays with each store (it is written inside the store's own start transaction).

-- name: api_key_lock@postgres
-- Serialises bootstrap: "insert only if there is no key yet" must not race.
SELECT pg_advisory_xact_lock(hashtext('wovyr.api_keys.bootstrap'));

-- name: api_key_any
SELECT 1 FROM api_keys LIMIT 1;

-- name: api_key_insert
INSERT INTO api_keys (id, tenant, role, name, prefix, key_hash, created_at, revoked_at,
                      last_used_at)
VALUES (:id, :tenant, :role, :name, :prefix, :key_hash, :created_at,
        :revoked_at, :last_used_at)
ON CONFLICT DO NOTHING;

-- name: api_key_by_hash
SELECT id, tenant, role, name, prefix, key_hash, created_at, revoked_at, last_used_at
FROM api_keys WHERE key_hash = :key_hash;

-- name: api_key_get
SELECT id, tenant, role, name, prefix, key_hash, created_at, revoked_at, last_used_at
FROM api_keys WHERE id = :id;

-- name: api_key_list
SELECT id, tenant, role, name, prefix, key_hash, created_at, revoked_at, last_used_at
FROM api_keys ORDER BY created_at, id;

-- name: api_key_list_tenant
SELECT id, tenant, role, name, prefix, key_hash, created_at, revoked_at, last_used_at
FROM api_keys WHERE tenant = :tenant ORDER BY created_at, id;

-- name: api_key_revoke
UPDATE api_keys SET revoked_at = coalesce(revoked_at, :at) WHERE id = :id;

-- name: api_key_touch
UPDATE api_keys SET last_used_at = :at WHERE id = :id;

-- name: idempotency_claim@postgres
-- Insert unless the key exists, and return the row that holds the key either way.
WITH inserted AS (
    INSERT INTO idempotency_keys (tenant, key, fingerprint, execution_id, created_at)
    VALUES (:tenant, :key, :fingerprint, :execution_id, :created_at)
    ON CONFLICT (tenant, key) DO NOTHING
    RETURNING tenant, key, fingerprint, execution_id, created_at
)
SELECT tenant, key, fingerprint, execution_id, created_at FROM inserted
UNION ALL
SELECT tenant, key, fingerprint, execution_id, created_at FROM idempotency_keys
WHERE tenant = :tenant AND key = :key AND NOT EXISTS (SELECT 1 FROM inserted);

-- name: idempotency_claim@sqlite
-- Insert unless the key exists; the row when inserted (else `idempotency_get` reads it).
INSERT INTO idempotency_keys (tenant, key, fingerprint, execution_id, created_at)
VALUES (:tenant, :key, :fingerprint, :execution_id, :created_at)
ON CONFLICT (tenant, key) DO NOTHING
RETURNING tenant, key, fingerprint, execution_id, created_at;

-- name: idempotency_get
-- A concurrent claim committed after the claim's snapshot was taken: a new statement sees
-- its row.
SELECT tenant, key, fingerprint, execution_id, created_at FROM idempotency_keys
WHERE tenant = :tenant AND key = :key;

-- name: idempotency_purge
DELETE FROM idempotency_keys WHERE created_at < :before;

-- name: session_revoke
INSERT INTO revoked_sessions (session_id, until) VALUES (:session_id, :until)
ON CONFLICT (session_id) DO UPDATE SET until = CASE
    WHEN excluded.until > revoked_sessions.until THEN excluded.until
    ELSE revoked_sessions.until END;

-- name: session_revoked
SELECT 1 FROM revoked_sessions WHERE session_id = :session_id;

-- name: session_purge
DELETE FROM revoked_sessions WHERE until < :before;

-- name: tenant_get
SELECT tenant, policy, updated_at, updated_by, quotas, seal_payloads, retention FROM tenants
WHERE tenant = :tenant;

-- name: tenant_put
INSERT INTO tenants (tenant, policy, updated_at, updated_by, quotas, seal_payloads, retention)
VALUES (:tenant, :policy, :updated_at, :updated_by, :quotas, :seal_payloads,
        :retention)
ON CONFLICT (tenant) DO UPDATE SET policy = excluded.policy, updated_at = excluded.updated_at,
    updated_by = excluded.updated_by, quotas = excluded.quotas,
    seal_payloads = excluded.seal_payloads, retention = excluded.retention;

-- name: tenant_list
SELECT tenant, policy, updated_at, updated_by, quotas, seal_payloads, retention FROM tenants
ORDER BY tenant;

-- name: response_get
SELECT response FROM llm_responses WHERE tenant = :tenant AND request_hash = :key;

-- name: response_put
INSERT INTO llm_responses (tenant, request_hash, response, created_at)
VALUES (:tenant, :key, :response::jsonb, :at)
ON CONFLICT (tenant, request_hash) DO NOTHING;

-- name: provider_put
INSERT INTO providers (tenant, name, base_url, api_key_secret, default_model, price_in,
                       price_out, updated_at, updated_by, kind, options, prices, token_limit)
VALUES (:tenant, :name, :base_url, :api_key_secret, :default_model,
        :price_in, :price_out, :updated_at, :updated_by, :kind, :options::jsonb,
        :prices::jsonb, :token_limit)
ON CONFLICT (tenant, name) DO UPDATE SET base_url = excluded.base_url,
    api_key_secret = excluded.api_key_secret, default_model = excluded.default_model,
    price_in = excluded.price_in, price_out = excluded.price_out,
    updated_at = excluded.updated_at, updated_by = excluded.updated_by, kind = excluded.kind,
    options = excluded.options, prices = excluded.prices, token_limit = excluded.token_limit;

-- name: provider_get
SELECT tenant, name, base_url, api_key_secret, default_model, price_in, price_out,
       updated_at, updated_by, kind, options, prices, token_limit
FROM providers WHERE tenant = :tenant AND name = :name;

-- name: provider_list
SELECT tenant, name, base_url, api_key_secret, default_model, price_in, price_out,
       updated_at, updated_by, kind, options, prices, token_limit
FROM providers WHERE tenant = :tenant ORDER BY name;

-- name: provider_delete
DELETE FROM providers WHERE tenant = :tenant AND name = :name;

-- name: mcp_server_put
INSERT INTO mcp_servers (tenant, name, transport, command, url, header_secrets, updated_at,
                         updated_by)
VALUES (:tenant, :name, :transport, :command::jsonb, :url,
        :header_secrets::jsonb, :updated_at, :updated_by)
ON CONFLICT (tenant, name) DO UPDATE SET transport = excluded.transport,
    command = excluded.command, url = excluded.url, header_secrets = excluded.header_secrets,
    updated_at = excluded.updated_at, updated_by = excluded.updated_by;

-- name: mcp_server_get
SELECT tenant, name, transport, command, url, header_secrets, updated_at, updated_by
FROM mcp_servers WHERE tenant = :tenant AND name = :name;

-- name: mcp_server_list
SELECT tenant, name, transport, command, url, header_secrets, updated_at, updated_by
FROM mcp_servers WHERE tenant = :tenant ORDER BY name;

-- name: mcp_server_delete
DELETE FROM mcp_servers WHERE tenant = :tenant AND name = :name;
