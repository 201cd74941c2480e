-- Named queries of the KMS and secrets tables of the PostgreSQL store, loaded by
-- wovyr.store.postgres.secrets. Parameters are psycopg's %(name)s.

-- name: data_key_add
INSERT INTO data_keys (tenant, version, wrapped, root_id, created_at)
VALUES (%(tenant)s, %(version)s, %(wrapped)s, %(root_id)s, %(created_at)s)
ON CONFLICT DO NOTHING;

-- name: data_key_get
SELECT tenant, version, wrapped, root_id, created_at FROM data_keys
WHERE tenant = %(tenant)s AND (%(version)s::integer IS NULL OR version = %(version)s::integer)
ORDER BY version DESC LIMIT 1;

-- name: data_key_list
SELECT tenant, version, wrapped, root_id, created_at FROM data_keys ORDER BY tenant, version;

-- name: data_key_rewrap
UPDATE data_keys SET wrapped = %(wrapped)s, root_id = %(root_id)s
WHERE tenant = %(tenant)s AND version = %(version)s AND root_id = %(old_root_id)s;

-- name: data_key_shred
UPDATE data_keys SET wrapped = ''::bytea, root_id = %(shredded)s
WHERE tenant = %(tenant)s AND root_id != %(shredded)s;

-- name: data_key_vacuum
VACUUM data_keys;

-- name: secret_put
INSERT INTO secrets AS s (tenant, name, version, ciphertext, key_version, created_at,
                          updated_at, updated_by)
VALUES (%(tenant)s, %(name)s, 1, %(ciphertext)s, %(key_version)s, %(at)s, %(at)s, %(by)s)
ON CONFLICT (tenant, name) DO UPDATE SET version = s.version + 1,
    ciphertext = excluded.ciphertext, key_version = excluded.key_version,
    updated_at = excluded.updated_at, updated_by = excluded.updated_by
RETURNING tenant, name, version, ciphertext, key_version, created_at, updated_at, updated_by;

-- name: secret_get
SELECT tenant, name, version, ciphertext, key_version, created_at, updated_at, updated_by
FROM secrets WHERE tenant = %(tenant)s AND name = %(name)s;

-- name: secret_list
SELECT tenant, name, version, ciphertext, key_version, created_at, updated_at, updated_by
FROM secrets WHERE tenant = %(tenant)s ORDER BY name;

-- name: secret_delete
DELETE FROM secrets WHERE tenant = %(tenant)s AND name = %(name)s;

-- name: kms_root_get
SELECT root_id, created_at, escrowed_at, escrowed_by, rotated_at FROM kms_roots
WHERE root_id = %(root_id)s;

-- name: kms_root_put
INSERT INTO kms_roots (root_id, created_at, escrowed_at, escrowed_by, rotated_at)
VALUES (%(root_id)s, %(created_at)s, %(escrowed_at)s, %(escrowed_by)s, %(rotated_at)s)
ON CONFLICT (root_id) DO UPDATE SET created_at = excluded.created_at,
    escrowed_at = excluded.escrowed_at, escrowed_by = excluded.escrowed_by,
    rotated_at = excluded.rotated_at;
