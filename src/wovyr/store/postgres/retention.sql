-- Retention (wovyr.store.retention): purging finished executions with everything kept for
-- them (finding them is shared: wovyr/store/sql/retention.sql). The status list is spelled
-- as in the partial indexes of 0036_retention.sql, which hold only finished executions.

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
