-- Retention (wovyr.store.retention): finding finished executions by finish time, and
-- purging them with everything kept for them. The status list is spelled as in the partial
-- indexes of 0036_retention.sql, which hold only finished executions.

-- name: find_expired
-- The cursor is always given (from -infinity at the first page), so the row comparison is
-- an index condition on (tenant, updated_at, id), never a filter walked from the start.
SELECT id, workflow, status, updated_at FROM executions
WHERE status IN ('completed', 'failed', 'cancelled', 'continued')
  AND tenant = %(tenant)s AND updated_at < %(before)s
  AND (updated_at, id) > (%(after_at)s, %(after_id)s)
ORDER BY updated_at, id LIMIT %(limit)s;

-- name: find_expired_workflow
SELECT id, workflow, status, updated_at FROM executions
WHERE status IN ('completed', 'failed', 'cancelled', 'continued')
  AND tenant = %(tenant)s AND workflow = %(workflow)s AND updated_at < %(before)s
  AND (updated_at, id) > (%(after_at)s, %(after_id)s)
ORDER BY updated_at, id LIMIT %(limit)s;

-- name: purge_lock
-- The finished ones among the ids, locked until the purge commits, with the bucket (creation
-- month) that names their events' partition.
SELECT id, events_bucket(created_at) FROM executions
WHERE tenant = %(tenant)s AND id = ANY(%(ids)s)
  AND status IN ('completed', 'failed', 'cancelled', 'continued')
FOR UPDATE;

-- name: purge_droppable
-- The buckets of the purged executions whose whole partition can go instead of their rows:
-- a month before the database's current one, with a partition, and no execution of that
-- month left besides the ones purged (any tenant). Looked at again under the lock by
-- events_drop_partition.
SELECT b FROM unnest(%(buckets)s::integer[]) AS b
WHERE b < events_bucket(now())
  AND to_regclass(quote_ident(current_schema()) || '.' || quote_ident(events_partition_name(b)))
      IS NOT NULL
  AND NOT EXISTS (
      SELECT 1 FROM executions
      WHERE created_at >= events_bucket_start(b) AND created_at < events_bucket_start(b + 1)
        AND NOT (tenant = %(tenant)s AND id = ANY(%(ids)s)));

-- name: purge_events
-- Only in the buckets given (the partitions that stay): the planner prunes to them.
DELETE FROM events
WHERE tenant = %(tenant)s AND execution_id = ANY(%(ids)s)
  AND bucket = ANY(%(buckets)s::integer[]);

-- name: purge_timers
DELETE FROM timers WHERE tenant = %(tenant)s AND execution_id = ANY(%(ids)s);

-- name: purge_labels
-- Each label row by its whole primary key, from the labels kept on the execution.
DELETE FROM execution_labels AS l
USING executions AS x, jsonb_each_text(x.labels) AS kv
WHERE x.tenant = %(tenant)s AND x.id = ANY(%(ids)s) AND x.labels IS NOT NULL
  AND l.tenant = x.tenant AND l.key = kv.key AND l.value = kv.value
  AND l.created_at = x.created_at AND l.execution_id = x.id;

-- name: purge_flow_slots
DELETE FROM flow_slots WHERE tenant = %(tenant)s AND execution_id = ANY(%(ids)s);

-- name: purge_activity_slots
DELETE FROM activity_slots WHERE tenant = %(tenant)s AND execution_id = ANY(%(ids)s);

-- name: purge_executions
-- Stream chunks go with their execution (the foreign key's ON DELETE CASCADE).
DELETE FROM executions WHERE tenant = %(tenant)s AND id = ANY(%(ids)s);
