-- name: registry_lookup
SELECT hash FROM registry WHERE tenant = %(tenant)s AND name = %(name)s AND version = %(version)s;

-- name: put_definition
-- A definition by content hash (applying it again changes nothing).
INSERT INTO definitions (tenant, hash, name, version, source, created_at)
VALUES (%(tenant)s, %(hash)s, %(name)s, %(version)s, %(source)s, %(created_at)s)
ON CONFLICT (tenant, hash) DO NOTHING;

-- name: registry_insert
INSERT INTO registry (tenant, name, version, hash, applied_at)
VALUES (%(tenant)s, %(name)s, %(version)s, %(hash)s, %(created_at)s);

-- name: registry_latest
SELECT d.hash, d.name, r.version, d.source, r.applied_at AS created_at, d.tenant
FROM registry r JOIN definitions d ON d.tenant = r.tenant AND d.hash = r.hash
WHERE r.tenant = %(tenant)s AND r.name = %(name)s
ORDER BY r.applied_at DESC LIMIT 1;

-- name: registry_version
SELECT d.hash, d.name, r.version, d.source, r.applied_at AS created_at, d.tenant
FROM registry r JOIN definitions d ON d.tenant = r.tenant AND d.hash = r.hash
WHERE r.tenant = %(tenant)s AND r.name = %(name)s AND r.version = %(version)s;

-- name: registry_list
SELECT d.hash, d.name, r.version, d.source, r.applied_at AS created_at, d.tenant
FROM registry r JOIN definitions d ON d.tenant = r.tenant AND d.hash = r.hash
WHERE r.tenant = %(tenant)s
ORDER BY r.applied_at DESC;
