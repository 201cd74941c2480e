-- name: memory_replayed
SELECT op, key, version, existed FROM memory_writes
WHERE tenant = %(tenant)s AND write_id = %(write_id)s;

-- name: memory_current
-- The live item's version, locked: two writers of one key number their versions in turn.
SELECT version FROM memory_items
WHERE tenant = %(tenant)s AND namespace = %(namespace)s AND key = %(key)s
  AND (expires_at IS NULL OR expires_at > %(now)s)
FOR UPDATE;

-- name: memory_upsert
INSERT INTO memory_items (tenant, namespace, key, value, text, embedding, embedding_model,
                          version, seq, updated_at, expires_at)
VALUES (%(tenant)s, %(namespace)s, %(key)s, %(value)s::json, %(text)s, %(embedding)s,
        %(model)s, %(version)s, %(seq)s, %(now)s, %(expires_at)s)
ON CONFLICT (tenant, namespace, key) DO UPDATE SET
    value = excluded.value, text = excluded.text, embedding = excluded.embedding,
    embedding_model = excluded.embedding_model, version = excluded.version,
    seq = excluded.seq, updated_at = excluded.updated_at, expires_at = excluded.expires_at;

-- name: memory_delete
DELETE FROM memory_items
WHERE tenant = %(tenant)s AND namespace = %(namespace)s AND key = %(key)s
RETURNING expires_at;

-- name: memory_purge_expired
DELETE FROM memory_items
WHERE tenant = %(tenant)s AND namespace = %(namespace)s
  AND expires_at IS NOT NULL AND expires_at <= %(now)s;

-- name: memory_bump
-- Every write bumps its namespace's version in its own transaction (the search cache's
-- tag); the row lock also orders the namespace's writers.
INSERT INTO memory_namespaces (tenant, namespace, version)
VALUES (%(tenant)s, %(namespace)s, 1)
ON CONFLICT (tenant, namespace) DO UPDATE SET version = memory_namespaces.version + 1
RETURNING version;

-- name: memory_count_delete
-- A row left the namespace: a cached matrix must drop it (a rebuild, not an update).
UPDATE memory_namespaces SET deletes = deletes + 1
WHERE tenant = %(tenant)s AND namespace = %(namespace)s;

-- name: memory_purge_writes
DELETE FROM memory_writes WHERE tenant = %(tenant)s AND at < %(horizon)s;

-- name: memory_record_write
INSERT INTO memory_writes (tenant, write_id, op, key, version, existed, at)
VALUES (%(tenant)s, %(write_id)s, %(op)s, %(key)s, %(version)s, %(existed)s, %(now)s);

-- name: memory_get
-- One primary-key probe per key (a join on the keys, not `key = ANY(...)`, which a planner
-- that underestimates the namespace may turn into a scan of it filtered by key).
SELECT m.tenant, m.namespace, m.key, m.value::text, m.text, m.embedding_model, m.version,
       m.updated_at, m.expires_at
FROM unnest(%(keys)s::text[]) AS wanted(key)
JOIN memory_items m
  ON m.tenant = %(tenant)s AND m.namespace = %(namespace)s AND m.key = wanted.key
WHERE m.expires_at IS NULL OR m.expires_at > %(now)s;

-- name: memory_list
SELECT tenant, namespace, key, value::text, text, embedding_model, version, updated_at,
       expires_at
FROM memory_items
WHERE tenant = %(tenant)s AND namespace = %(namespace)s AND key > %(after)s
  AND left(key, length(%(prefix)s)) = %(prefix)s
  AND (expires_at IS NULL OR expires_at > %(now)s)
ORDER BY key LIMIT %(limit)s;

-- name: memory_marks
SELECT version, deletes FROM memory_namespaces
WHERE tenant = %(tenant)s AND namespace = %(namespace)s;

-- name: memory_vectors
SELECT key, embedding, expires_at FROM memory_items
WHERE tenant = %(tenant)s AND namespace = %(namespace)s AND embedding_model = %(model)s
  AND embedding IS NOT NULL;

-- name: memory_vectors_after
-- The items written after a cached matrix was built (by `seq`), of every model: one whose
-- text is gone or was embedded by another model leaves the matrix.
SELECT key, CASE WHEN embedding_model = %(model)s THEN embedding END, expires_at
FROM memory_items
WHERE tenant = %(tenant)s AND namespace = %(namespace)s AND seq > %(after)s;
