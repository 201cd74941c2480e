-- Flow control's rate-limit buckets and what is in use (wovyr.store.flow). Taking units and
-- slots is each store's own (`acquire_flows`): the locks differ.

-- name: bucket_declare
INSERT INTO rate_buckets (tenant, key, capacity, per_second, tokens, refilled_at, declared,
                          updated_by)
VALUES (:tenant, :key, :capacity, :per_second, :capacity, :now, true, :by)
ON CONFLICT (tenant, key) DO UPDATE
SET capacity = excluded.capacity, per_second = excluded.per_second,
    tokens = CASE WHEN rate_buckets.tokens < excluded.capacity THEN rate_buckets.tokens
                  ELSE excluded.capacity END,
    declared = true, updated_by = excluded.updated_by;

-- name: buckets_list
SELECT key, capacity, per_second, tokens, declared, updated_by, refilled_at
FROM rate_buckets
WHERE tenant = :tenant
ORDER BY key;

-- name: bucket_delete
DELETE FROM rate_buckets WHERE tenant = :tenant AND key = :key;

-- name: activity_holders_now
SELECT s.holder
FROM activity_slots s
JOIN executions x ON x.tenant = s.tenant AND x.id = s.execution_id
WHERE s.tenant = :tenant AND s.key = :key AND x.lease_owner = s.owner
  AND x.lease_until >= {lease_now}
ORDER BY s.holder;

-- name: flow_keys
-- The tenant's concurrency keys in use: workflow keys' holders and waiting executions;
-- activity keys' attempts whose slot still counts and the waiters that still wait.
SELECT 'workflow' AS kind, key, count(*) FILTER (WHERE holding) AS running,
       count(*) FILTER (WHERE NOT holding) AS waiting
FROM flow_slots WHERE tenant = :tenant GROUP BY key
UNION ALL
SELECT 'activity', key, count(*) FILTER (WHERE running), count(*) FILTER (WHERE NOT running)
FROM (
    SELECT s.key, true AS running
    FROM activity_slots s
    JOIN executions x ON x.tenant = s.tenant AND x.id = s.execution_id
    WHERE s.tenant = :tenant AND x.lease_owner = s.owner AND x.lease_until >= {lease_now}
    UNION ALL
    SELECT w.key, false
    FROM activity_slot_waiters w
    JOIN executions x ON x.tenant = w.tenant AND x.id = w.execution_id
    WHERE w.tenant = :tenant AND w.until >= {lease_now}
      AND x.status NOT IN ('completed', 'failed', 'cancelled', 'continued')
) a
GROUP BY key
ORDER BY 1 DESC, 2;
