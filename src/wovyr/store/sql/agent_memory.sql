-- Agent memory (wovyr.store.agent_memory). Embeddings are blobs (bytea) searched in the
-- process (wovyr.store.vectors): pgvector is not assumed.

-- name: memory_replayed
SELECT op, key, version, existed FROM memory_writes
WHERE tenant = :tenant AND write_id = :write_id;

-- name: memory_current
-- The live item's version (SQLite's BEGIN IMMEDIATE serializes the writers).
SELECT version FROM memory_items
WHERE tenant = :tenant AND namespace = :namespace AND key = :key
  AND (expires_at IS NULL OR expires_at > :now);

-- name: memory_current@postgres
-- The live item's version, locked: two writers of one key number their versions in turn.
SELECT version FROM memory_items
WHERE tenant = :tenant AND namespace = :namespace AND key = :key
  AND (expires_at IS NULL OR expires_at > :now)
FOR UPDATE;

-- name: memory_upsert
INSERT INTO memory_items (tenant, namespace, key, value, text, embedding, embedding_model,
                          version, seq, updated_at, expires_at)
VALUES (:tenant, :namespace, :key, :value::json, :text, :embedding, :model, :version, :seq,
        :now, :expires_at)
ON CONFLICT (tenant, namespace, key) DO UPDATE SET
    value = excluded.value, text = excluded.text, embedding = excluded.embedding,
    embedding_model = excluded.embedding_model, version = excluded.version,
    seq = excluded.seq, updated_at = excluded.updated_at, expires_at = excluded.expires_at;

-- name: memory_delete
DELETE FROM memory_items
WHERE tenant = :tenant AND namespace = :namespace AND key = :key
RETURNING expires_at;

-- name: memory_purge_expired
DELETE FROM memory_items
WHERE tenant = :tenant AND namespace = :namespace
  AND expires_at IS NOT NULL AND expires_at <= :now;

-- name: memory_bump
-- Every write bumps its namespace's version first in its transaction (the search cache's
-- tag; what its item's `seq` is); on PostgreSQL the row lock also orders the writers.
INSERT INTO memory_namespaces (tenant, namespace, version)
VALUES (:tenant, :namespace, 1)
ON CONFLICT (tenant, namespace) DO UPDATE SET version = memory_namespaces.version + 1
RETURNING version;

-- name: memory_count_delete
-- A row left the namespace: a cached matrix must drop it (a rebuild, not an update).
UPDATE memory_namespaces SET deletes = deletes + 1
WHERE tenant = :tenant AND namespace = :namespace;

-- name: memory_purge_writes
DELETE FROM memory_writes WHERE tenant = :tenant AND at < :horizon;

-- name: memory_record_write
INSERT INTO memory_writes (tenant, write_id, op, key, version, existed, at)
VALUES (:tenant, :write_id, :op, :key, :version, :existed, :now);

-- name: memory_get@postgres
-- One primary-key probe per key (a join on the keys, not `key = ANY(...)`, which a planner
-- that underestimates the namespace may turn into a scan of it filtered by key).
SELECT m.tenant, m.namespace, m.key, m.value, m.text, m.embedding_model, m.version,
       m.updated_at, m.expires_at
FROM unnest(:keys::text[]) AS wanted(key)
JOIN memory_items m
  ON m.tenant = :tenant AND m.namespace = :namespace AND m.key = wanted.key
WHERE m.expires_at IS NULL OR m.expires_at > :now;

-- name: memory_get@sqlite
-- The same join, the keys a JSON array (no limit on bound parameters to chunk around);
-- CROSS JOIN keeps the keys the outer loop (else SQLite may walk the whole namespace).
SELECT m.tenant, m.namespace, m.key, m.value, m.text, m.embedding_model, m.version,
       m.updated_at, m.expires_at
FROM json_each(:keys) AS wanted
CROSS JOIN memory_items m
  ON m.tenant = :tenant AND m.namespace = :namespace AND m.key = wanted.value
WHERE m.expires_at IS NULL OR m.expires_at > :now;

-- name: memory_list
SELECT tenant, namespace, key, value, text, embedding_model, version, updated_at, expires_at
FROM memory_items
WHERE tenant = :tenant AND namespace = :namespace AND key > :after
  AND substr(key, 1, length(:prefix)) = :prefix
  AND (expires_at IS NULL OR expires_at > :now)
ORDER BY key LIMIT :limit;

-- name: memory_marks
SELECT version, deletes FROM memory_namespaces
WHERE tenant = :tenant AND namespace = :namespace;

-- name: memory_vectors
SELECT key, embedding, expires_at FROM memory_items
WHERE tenant = :tenant AND namespace = :namespace AND embedding_model = :model
  AND embedding IS NOT NULL;

-- name: memory_vectors_after
-- The items written after a cached matrix was built (by `seq`), of every model: one whose
-- text is gone or was embedded by another model leaves the matrix.
SELECT key, CASE WHEN embedding_model = :model THEN embedding END AS embedding, expires_at
FROM memory_items
WHERE tenant = :tenant AND namespace = :namespace AND seq > :after;
