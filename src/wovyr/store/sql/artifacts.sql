-- Artifacts (wovyr.store.artifacts): bytes a tenant stores once, by content hash.

-- name: artifact_insert
INSERT INTO artifacts (tenant, digest, media_type, size, data, created_at, created_by)
VALUES (:tenant, :digest, :media_type, :size, :data, :created_at, :created_by)
ON CONFLICT (tenant, digest) DO NOTHING;

-- name: artifact_get
SELECT tenant, digest, media_type, size, created_at, created_by FROM artifacts
WHERE tenant = :tenant AND digest = :digest;

-- name: artifact_read
SELECT tenant, digest, media_type, size, created_at, created_by, data FROM artifacts
WHERE tenant = :tenant AND digest = :digest;

-- name: artifact_page
SELECT tenant, digest, media_type, size, created_at, created_by FROM artifacts
WHERE tenant = :tenant
  AND (created_at < :before_at OR (created_at = :before_at AND digest < :before_digest))
ORDER BY created_at DESC, digest DESC LIMIT :limit;
