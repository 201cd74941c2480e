-- Definitions by content hash and the registry (name, version) -> hash
-- (wovyr.store.registry).

-- name: get_definition
SELECT hash, name, version, source, created_at, tenant FROM definitions
WHERE tenant = :tenant AND hash = :hash;

-- name: put_definition
-- A definition by content hash (applying it again changes nothing).
INSERT INTO definitions (tenant, hash, name, version, source, created_at)
VALUES (:tenant, :hash, :name, :version, :source, :created_at)
ON CONFLICT (tenant, hash) DO NOTHING;

-- name: registry_lock@postgres
-- Two hosts applying the same (name, version) at once: one waits for the other (SQLite's
-- BEGIN IMMEDIATE serializes every writer already).
SELECT pg_advisory_xact_lock(hashtext(:tenant || '/' || :name || '/' || :version));

-- name: registry_lookup
SELECT hash FROM registry WHERE tenant = :tenant AND name = :name AND version = :version;

-- name: registry_insert
INSERT INTO registry (tenant, name, version, hash, applied_at)
VALUES (:tenant, :name, :version, :hash, :created_at);

-- name: registry_latest
SELECT d.hash, d.name, r.version, d.source, r.applied_at AS created_at, d.tenant
FROM registry r JOIN definitions d ON d.tenant = r.tenant AND d.hash = r.hash
WHERE r.tenant = :tenant AND r.name = :name
ORDER BY r.applied_at DESC LIMIT 1;

-- name: registry_latest@sqlite
-- The last applied first; of two applied in the same microsecond, the later row.
SELECT d.hash, d.name, r.version, d.source, r.applied_at AS created_at, d.tenant
FROM registry r JOIN definitions d ON d.tenant = r.tenant AND d.hash = r.hash
WHERE r.tenant = :tenant AND r.name = :name
ORDER BY r.applied_at DESC, r.rowid DESC LIMIT 1;

-- name: registry_version
SELECT d.hash, d.name, r.version, d.source, r.applied_at AS created_at, d.tenant
FROM registry r JOIN definitions d ON d.tenant = r.tenant AND d.hash = r.hash
WHERE r.tenant = :tenant AND r.name = :name AND r.version = :version;

-- name: registry_list
SELECT d.hash, d.name, r.version, d.source, r.applied_at AS created_at, d.tenant
FROM registry r JOIN definitions d ON d.tenant = r.tenant AND d.hash = r.hash
WHERE r.tenant = :tenant
ORDER BY r.applied_at DESC;

-- name: registry_list@sqlite
SELECT d.hash, d.name, r.version, d.source, r.applied_at AS created_at, d.tenant
FROM registry r JOIN definitions d ON d.tenant = r.tenant AND d.hash = r.hash
WHERE r.tenant = :tenant
ORDER BY r.applied_at DESC, r.rowid DESC;
