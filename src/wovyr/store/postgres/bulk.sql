-- name: batch_insert
-- ON CONFLICT: the tenant's batch with this idempotency key, or its running batch with this
-- fingerprint, was made first (by another request at the same moment): nothing inserted.
INSERT INTO batches (tenant, id, action, filter, signal, payload, created_at, created_by,
                     fingerprint, idempotency_key, status, updated_at)
VALUES (%(tenant)s, %(id)s, %(action)s, %(filter)s::json, %(signal)s, %(payload)s::json,
        %(at)s, %(created_by)s, %(fingerprint)s, %(key)s, 'running', %(at)s)
ON CONFLICT DO NOTHING
RETURNING id;

-- name: batch_by_key
SELECT {columns} FROM batches WHERE tenant = %(tenant)s AND idempotency_key = %(key)s;

-- name: batch_by_fingerprint
SELECT {columns} FROM batches
WHERE tenant = %(tenant)s AND fingerprint = %(fingerprint)s AND status = 'running';

-- name: batch_get
SELECT {columns} FROM batches WHERE tenant = %(tenant)s AND id = %(id)s;

-- name: batch_lock
SELECT {columns} FROM batches WHERE tenant = %(tenant)s AND id = %(id)s FOR UPDATE;

-- name: batch_list
SELECT {columns} FROM batches WHERE tenant = %(tenant)s
  AND (%(at)s::timestamptz IS NULL OR (created_at, id) < (%(at)s::timestamptz, %(ident)s))
ORDER BY created_at DESC, id DESC LIMIT %(limit)s;

-- name: batch_items
SELECT n, execution_id, outcome, detail, at FROM batch_items
WHERE tenant = %(tenant)s AND batch_id = %(id)s AND n > %(after)s
  AND (%(outcome)s::text IS NULL OR outcome = %(outcome)s::text)
ORDER BY n LIMIT %(limit)s;

-- name: batch_claim
-- The running batch worked on least recently whose lease is free, expired or the owner's;
-- a batch another runner is claiming at this moment is skipped, never waited for. With
-- db_clock `now` is NULL and leases are measured on the database's clock, as executions'.
UPDATE batches
SET lease_owner = %(owner)s,
    lease_until = COALESCE(%(now)s::timestamptz, now()) + %(lease)s::interval,
    fence = fence + 1
WHERE (tenant, id) = (
    SELECT tenant, id FROM batches
    WHERE status = 'running'
      AND (lease_until IS NULL OR lease_until < COALESCE(%(now)s::timestamptz, now())
           OR lease_owner = %(owner)s)
    ORDER BY updated_at, tenant, id LIMIT 1 FOR UPDATE SKIP LOCKED)
RETURNING {columns};

-- name: batch_item_insert
INSERT INTO batch_items (tenant, batch_id, n, execution_id, outcome)
VALUES (%(tenant)s, %(id)s, %(n)s, %(execution_id)s, 'pending')
ON CONFLICT DO NOTHING;

-- name: batch_item_outcome
UPDATE batch_items SET outcome = %(outcome)s, detail = %(detail)s, at = %(at)s
WHERE tenant = %(tenant)s AND batch_id = %(id)s AND execution_id = %(execution_id)s
  AND outcome = 'pending';

-- name: batch_update
UPDATE batches SET listed = %(listed)s, ok = %(ok)s, skipped = %(skipped)s,
    errors = %(errors)s, cursor = %(cursor)s, listed_all = %(listed_all)s,
    pages = pages + %(pages)s, updated_at = %(at)s, status = %(status)s,
    finished_at = %(finished_at)s, lease_owner = %(lease_owner)s,
    lease_until = CASE WHEN %(lease_owner)s::text IS NULL THEN NULL
                       ELSE COALESCE(%(now)s::timestamptz, now()) + %(lease)s::interval END
WHERE tenant = %(tenant)s AND id = %(id)s
RETURNING {columns};
