-- The KMS and secrets tables (wovyr.store.secrets).

-- name: data_key_add
INSERT INTO data_keys (tenant, version, wrapped, root_id, created_at)
VALUES (:tenant, :version, :wrapped, :root_id, :created_at)
ON CONFLICT DO NOTHING;

-- name: data_key_get
SELECT tenant, version, wrapped, root_id, created_at FROM data_keys
WHERE tenant = :tenant AND version = :version;

-- name: data_key_latest
SELECT tenant, version, wrapped, root_id, created_at FROM data_keys
WHERE tenant = :tenant ORDER BY version DESC LIMIT 1;

-- name: data_key_list
SELECT tenant, version, wrapped, root_id, created_at FROM data_keys ORDER BY tenant, version;

-- name: data_key_rewrap
UPDATE data_keys SET wrapped = :wrapped, root_id = :root_id
WHERE tenant = :tenant AND version = :version AND root_id = :old_root_id;

-- name: data_key_shred
UPDATE data_keys SET wrapped = :empty, root_id = :shredded
WHERE tenant = :tenant AND root_id != :shredded;

-- name: secret_put
INSERT INTO secrets AS s (tenant, name, version, ciphertext, key_version, created_at,
                          updated_at, updated_by)
VALUES (:tenant, :name, 1, :ciphertext, :key_version, :at, :at, :by)
ON CONFLICT (tenant, name) DO UPDATE SET version = s.version + 1,
    ciphertext = excluded.ciphertext, key_version = excluded.key_version,
    updated_at = excluded.updated_at, updated_by = excluded.updated_by
RETURNING tenant, name, version, ciphertext, key_version, created_at, updated_at, updated_by;

-- name: secret_get
SELECT tenant, name, version, ciphertext, key_version, created_at, updated_at, updated_by
FROM secrets WHERE tenant = :tenant AND name = :name;

-- name: secret_list
SELECT tenant, name, version, ciphertext, key_version, created_at, updated_at, updated_by
FROM secrets WHERE tenant = :tenant ORDER BY name;

-- name: secret_delete
DELETE FROM secrets WHERE tenant = :tenant AND name = :name;

-- name: kms_root_get
SELECT root_id, created_at, escrowed_at, escrowed_by, rotated_at FROM kms_roots
WHERE root_id = :root_id;

-- name: kms_root_put
INSERT INTO kms_roots (root_id, created_at, escrowed_at, escrowed_by, rotated_at)
VALUES (:root_id, :created_at, :escrowed_at, :escrowed_by, :rotated_at)
ON CONFLICT (root_id) DO UPDATE SET created_at = excluded.created_at,
    escrowed_at = excluded.escrowed_at, escrowed_by = excluded.escrowed_by,
    rotated_at = excluded.rotated_at;
