-- Bulk-action batches and their items (wovyr.store.bulk).

-- name: batch_insert
-- ON CONFLICT: the tenant's batch with this idempotency key, or its running batch with this
-- fingerprint, was made first (by another request at the same moment): nothing inserted.
INSERT INTO batches (tenant, id, action, filter, signal, payload, created_at, created_by,
                     fingerprint, idempotency_key, status, updated_at)
VALUES (:tenant, :id, :action, :filter::json, :signal, :payload::json,
        :at, :created_by, :fingerprint, :key, 'running', :at)
ON CONFLICT DO NOTHING
RETURNING id;

-- name: batch_by_key
SELECT {columns} FROM batches WHERE tenant = :tenant AND idempotency_key = :key;

-- name: batch_by_fingerprint
SELECT {columns} FROM batches
WHERE tenant = :tenant AND fingerprint = :fingerprint AND status = 'running';

-- name: batch_get
SELECT {columns} FROM batches WHERE tenant = :tenant AND id = :id;

-- name: batch_lock
SELECT {columns} FROM batches WHERE tenant = :tenant AND id = :id {row_lock};

-- name: batch_list
SELECT {columns} FROM batches WHERE tenant = :tenant
  AND (:at::timestamptz IS NULL OR (created_at, id) < (:at::timestamptz, :ident))
ORDER BY created_at DESC, id DESC LIMIT :limit;

-- name: batch_items
SELECT n, execution_id, outcome, detail, at FROM batch_items
WHERE tenant = :tenant AND batch_id = :batch_id AND n > :after
  AND (:outcome::text IS NULL OR outcome = :outcome::text)
ORDER BY n LIMIT :limit;

-- name: batch_claim
-- The running batch worked on least recently whose lease is free, expired or the owner's;
-- a batch another runner is claiming at this moment is skipped, never waited for.
UPDATE batches SET lease_owner = :owner, lease_until = {lease_until}, fence = fence + 1
WHERE (tenant, id) = (
    SELECT tenant, id FROM batches
    WHERE status = 'running'
      AND (lease_until IS NULL OR lease_until < {lease_now} OR lease_owner = :owner)
    ORDER BY updated_at, tenant, id LIMIT 1 {skip_locked})
RETURNING {columns};

-- name: batch_item_insert
INSERT INTO batch_items (tenant, batch_id, n, execution_id, outcome)
VALUES (:tenant, :id, :n, :execution_id, 'pending')
ON CONFLICT DO NOTHING;

-- name: batch_item_outcome
UPDATE batch_items SET outcome = :outcome, detail = :detail, at = :at
WHERE tenant = :tenant AND batch_id = :id AND execution_id = :execution_id
  AND outcome = 'pending';

-- name: batch_update
UPDATE batches SET listed = :listed, ok = :ok, skipped = :skipped,
    errors = :errors, cursor = :cursor, listed_all = :listed_all,
    pages = pages + :pages, updated_at = :at, status = :status,
    finished_at = :finished_at, lease_owner = :lease_owner,
    lease_until = CASE WHEN :lease_owner::text IS NULL THEN NULL ELSE {lease_until} END
WHERE tenant = :tenant AND id = :id
RETURNING {columns};

-- name: columns
tenant, id, action, filter, signal, payload, created_at, created_by, fingerprint,
idempotency_key, status, updated_at, finished_at, cursor, listed_all, listed, ok, skipped,
errors, pages, lease_owner, lease_until, fence
