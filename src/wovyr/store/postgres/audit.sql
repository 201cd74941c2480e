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
