-- Retention (wovyr.store.retention): finding finished executions by finish time. The status
-- list is spelled as in the partial indexes (migrations `*_retention.sql`), which hold only
-- finished executions: SQLite uses a partial index only when the query's WHERE contains its
-- condition term for term. Purging is each store's own (PostgreSQL drops whole partitions).

-- name: find_expired
-- The cursor is always given (from the first instant at the first page), so the row
-- comparison is an index condition on (tenant, updated_at, id), never a filter walked from
-- the start.
SELECT id, workflow, status, updated_at FROM executions
WHERE status IN ('completed', 'failed', 'cancelled', 'continued')
  AND tenant = :tenant AND updated_at < :before
  AND (updated_at, id) > (:after_at, :after_id)
ORDER BY updated_at, id LIMIT :limit;

-- name: find_expired_workflow
SELECT id, workflow, status, updated_at FROM executions
WHERE status IN ('completed', 'failed', 'cancelled', 'continued')
  AND tenant = :tenant AND workflow = :workflow AND updated_at < :before
  AND (updated_at, id) > (:after_at, :after_id)
ORDER BY updated_at, id LIMIT :limit;
