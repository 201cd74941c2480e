-- Named queries of the platform half of the PostgreSQL store (API keys, idempotency keys,
-- revoked UI sessions), loaded by wovyr.store.postgres.platform. Parameters are psycopg's
-- %(name)s.

-- name: api_key_lock
-- Serialises bootstrap: "insert only if there is no key yet" must not race.
SELECT pg_advisory_xact_lock(hashtext('wovyr.api_keys.bootstrap'));

-- name: api_key_any
SELECT 1 FROM api_keys LIMIT 1;

-- name: api_key_insert
INSERT INTO api_keys (id, tenant, role, name, prefix, key_hash, created_at, revoked_at,
                      last_used_at)
VALUES (%(id)s, %(tenant)s, %(role)s, %(name)s, %(prefix)s, %(key_hash)s, %(created_at)s,
        %(revoked_at)s, %(last_used_at)s)
ON CONFLICT DO NOTHING;

-- name: api_key_by_hash
SELECT id, tenant, role, name, prefix, key_hash, created_at, revoked_at, last_used_at
FROM api_keys WHERE key_hash = %(key_hash)s;

-- name: api_key_get
SELECT id, tenant, role, name, prefix, key_hash, created_at, revoked_at, last_used_at
FROM api_keys WHERE id = %(id)s;

-- name: api_key_list
SELECT id, tenant, role, name, prefix, key_hash, created_at, revoked_at, last_used_at
FROM api_keys
WHERE (%(tenant)s::text IS NULL OR tenant = %(tenant)s::text)
ORDER BY created_at, id;

-- name: api_key_revoke
UPDATE api_keys SET revoked_at = coalesce(revoked_at, %(at)s) WHERE id = %(id)s;

-- name: api_key_touch
UPDATE api_keys SET last_used_at = %(at)s WHERE id = %(id)s;

-- name: idempotency_claim
-- Insert unless the key exists, and return the row that holds the key either way.
WITH inserted AS (
    INSERT INTO idempotency_keys (tenant, key, fingerprint, execution_id, created_at)
    VALUES (%(tenant)s, %(key)s, %(fingerprint)s, %(execution_id)s, %(created_at)s)
    ON CONFLICT (tenant, key) DO NOTHING
    RETURNING tenant, key, fingerprint, execution_id, created_at
)
SELECT tenant, key, fingerprint, execution_id, created_at FROM inserted
UNION ALL
SELECT tenant, key, fingerprint, execution_id, created_at FROM idempotency_keys
WHERE tenant = %(tenant)s AND key = %(key)s AND NOT EXISTS (SELECT 1 FROM inserted);

-- name: idempotency_purge
DELETE FROM idempotency_keys WHERE created_at < %(before)s;

-- name: session_revoke
INSERT INTO revoked_sessions (session_id, until) VALUES (%(session_id)s, %(until)s)
ON CONFLICT (session_id) DO UPDATE SET until = greatest(revoked_sessions.until, excluded.until);

-- name: session_revoked
SELECT 1 FROM revoked_sessions WHERE session_id = %(session_id)s;

-- name: session_purge
DELETE FROM revoked_sessions WHERE until < %(before)s;

-- name: tenant_get
SELECT tenant, policy, updated_at, updated_by, quotas, seal_payloads, retention FROM tenants WHERE tenant = %(tenant)s;

-- name: tenant_put
INSERT INTO tenants (tenant, policy, updated_at, updated_by, quotas, seal_payloads, retention)
VALUES (%(tenant)s, %(policy)s, %(updated_at)s, %(updated_by)s, %(quotas)s, %(seal_payloads)s,
        %(retention)s)
ON CONFLICT (tenant) DO UPDATE SET policy = excluded.policy, updated_at = excluded.updated_at,
    updated_by = excluded.updated_by, quotas = excluded.quotas,
    seal_payloads = excluded.seal_payloads, retention = excluded.retention;

-- name: tenant_list
SELECT tenant, policy, updated_at, updated_by, quotas, seal_payloads, retention FROM tenants ORDER BY tenant;

-- name: quota_usage
SELECT budget, used FROM quota_usage WHERE tenant = %(tenant)s AND day = %(day)s;

-- name: quota_debit
-- Add a debit to the tenant's ledger row of the day, unless the row would pass the limit
-- (NULL: no limit); one statement, so the row lock orders concurrent debits: no row back
-- means refused.
INSERT INTO quota_usage (tenant, budget, day, used)
VALUES (%(tenant)s, %(budget)s, %(day)s, %(amount)s)
ON CONFLICT (tenant, budget, day) DO UPDATE SET used = quota_usage.used + excluded.used
WHERE %(limit)s::double precision IS NULL
    OR (quota_usage.used + excluded.used <= %(limit)s::double precision
        AND quota_usage.used < %(limit)s::double precision)
RETURNING used;

-- name: running_lock
-- Serialises the starts of one tenant that check its concurrent-executions quota.
SELECT pg_advisory_xact_lock(hashtext('wovyr.running'), hashtext(%(tenant)s));

-- name: running_count
SELECT count(*) FROM executions WHERE tenant = %(tenant)s AND status = 'running';

-- name: response_get
SELECT response FROM llm_responses WHERE tenant = %(tenant)s AND request_hash = %(key)s;

-- name: response_put
INSERT INTO llm_responses (tenant, request_hash, response, created_at)
VALUES (%(tenant)s, %(key)s, %(response)s, %(at)s)
ON CONFLICT (tenant, request_hash) DO NOTHING;

-- name: provider_put
INSERT INTO providers (tenant, name, base_url, api_key_secret, default_model, price_in,
                       price_out, updated_at, updated_by, kind)
VALUES (%(tenant)s, %(name)s, %(base_url)s, %(api_key_secret)s, %(default_model)s,
        %(price_in)s, %(price_out)s, %(updated_at)s, %(updated_by)s, %(kind)s)
ON CONFLICT (tenant, name) DO UPDATE SET base_url = excluded.base_url,
    api_key_secret = excluded.api_key_secret, default_model = excluded.default_model,
    price_in = excluded.price_in, price_out = excluded.price_out,
    updated_at = excluded.updated_at, updated_by = excluded.updated_by, kind = excluded.kind;

-- name: provider_get
SELECT tenant, name, base_url, api_key_secret, default_model, price_in, price_out,
       updated_at, updated_by, kind
FROM providers WHERE tenant = %(tenant)s AND name = %(name)s;

-- name: provider_list
SELECT tenant, name, base_url, api_key_secret, default_model, price_in, price_out,
       updated_at, updated_by, kind
FROM providers WHERE tenant = %(tenant)s ORDER BY name;

-- name: provider_delete
DELETE FROM providers WHERE tenant = %(tenant)s AND name = %(name)s;

-- name: mcp_server_put
INSERT INTO mcp_servers (tenant, name, transport, command, url, header_secrets, updated_at,
                         updated_by)
VALUES (%(tenant)s, %(name)s, %(transport)s, %(command)s::jsonb, %(url)s,
        %(header_secrets)s::jsonb, %(updated_at)s, %(updated_by)s)
ON CONFLICT (tenant, name) DO UPDATE SET transport = excluded.transport,
    command = excluded.command, url = excluded.url, header_secrets = excluded.header_secrets,
    updated_at = excluded.updated_at, updated_by = excluded.updated_by;

-- name: mcp_server_get
SELECT tenant, name, transport, command, url, header_secrets, updated_at, updated_by
FROM mcp_servers WHERE tenant = %(tenant)s AND name = %(name)s;

-- name: mcp_server_list
SELECT tenant, name, transport, command, url, header_secrets, updated_at, updated_by
FROM mcp_servers WHERE tenant = %(tenant)s ORDER BY name;

-- name: mcp_server_delete
DELETE FROM mcp_servers WHERE tenant = %(tenant)s AND name = %(name)s;
