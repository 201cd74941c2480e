-- The audit chain (see wovyr.store.postgres.audit).

-- name: audit_head_lock
-- Every appender of every process waits here: the chain cannot fork.
SELECT seq, hash FROM audit_head WHERE id = 1 FOR UPDATE;

-- name: audit_insert
-- The record and the head that names it, in one statement (one round trip).
WITH record AS (
    INSERT INTO audit_log (seq, at, tenant, actor, action, target, details, prev_hash, hash)
    VALUES (%(seq)s, %(at)s, %(tenant)s, %(actor)s, %(action)s, %(target)s,
            %(details)s::jsonb, %(prev_hash)s, %(hash)s)
)
UPDATE audit_head SET seq = %(seq)s, hash = %(hash)s WHERE id = 1;

-- name: audit_last
SELECT seq, at, tenant, actor, action, target, details, prev_hash, hash FROM audit_log
ORDER BY seq DESC LIMIT 1;

-- name: audit_list
SELECT seq, at, tenant, actor, action, target, details, prev_hash, hash FROM audit_log
WHERE seq > %(after_seq)s
  AND (%(tenant)s::text IS NULL OR tenant = %(tenant)s::text)
  AND (%(since)s::timestamptz IS NULL OR at >= %(since)s::timestamptz)
ORDER BY seq LIMIT %(limit)s;

-- name: audit_anchor_insert
INSERT INTO audit_anchors (seq, hash, mac, at) VALUES (%(seq)s, %(hash)s, %(mac)s, %(at)s);

-- name: audit_anchor_list
SELECT seq, hash, mac, at FROM audit_anchors ORDER BY seq, at, id;
