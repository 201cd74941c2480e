-- Named queries of flow control's activity gates (wovyr.store.postgres.flow).

-- name: flow_now
SELECT COALESCE(%(now)s::timestamptz, now());

-- name: bucket_create
INSERT INTO rate_buckets (tenant, key, capacity, per_second, tokens, refilled_at)
VALUES (%(tenant)s, %(key)s, %(capacity)s, %(per_second)s, %(capacity)s, %(at)s)
ON CONFLICT (tenant, key) DO NOTHING;

-- name: buckets_lock
SELECT key, capacity, per_second, tokens, refilled_at, wake_at, declared
FROM rate_buckets
WHERE tenant = %(tenant)s AND key = ANY(%(keys)s::text[])
ORDER BY key
FOR UPDATE;

-- name: bucket_write
UPDATE rate_buckets
SET capacity = %(capacity)s, per_second = %(per_second)s, tokens = %(tokens)s,
    refilled_at = %(refilled_at)s, wake_at = %(wake_at)s
WHERE tenant = %(tenant)s AND key = %(key)s;

-- name: activity_slot_lock
SELECT pg_advisory_xact_lock(hashtext('wovyr.activity-slot.' || %(tenant)s), hashtext(%(key)s));

-- name: activity_holders
-- The holders whose execution's lease is still their worker's; the others' rows (a
-- crashed or replaced worker's) are deleted on the way.
WITH stale AS (
    DELETE FROM activity_slots AS s
    WHERE s.tenant = %(tenant)s AND s.key = %(key)s
      AND NOT EXISTS (
          SELECT FROM executions x
          WHERE x.tenant = s.tenant AND x.id = s.execution_id
            AND x.lease_owner = s.owner AND x.lease_until >= %(at)s)
    RETURNING s.holder
)
SELECT s.holder
FROM activity_slots s
WHERE s.tenant = %(tenant)s AND s.key = %(key)s
  AND s.holder NOT IN (SELECT holder FROM stale)
ORDER BY s.holder;

-- name: activity_holders_now
SELECT s.holder
FROM activity_slots s
JOIN executions x ON x.tenant = s.tenant AND x.id = s.execution_id
WHERE s.tenant = %(tenant)s AND s.key = %(key)s AND x.lease_owner = s.owner
  AND x.lease_until >= COALESCE(%(now)s::timestamptz, now())
ORDER BY s.holder;

-- name: activity_slot_take
INSERT INTO activity_slots (tenant, key, holder, execution_id, owner)
VALUES (%(tenant)s, %(key)s, %(holder)s, %(id)s, %(owner)s)
ON CONFLICT (tenant, key, holder) DO UPDATE SET execution_id = EXCLUDED.execution_id,
    owner = EXCLUDED.owner;

-- name: activity_slots_release
DELETE FROM activity_slots
WHERE tenant = %(tenant)s AND key = %(key)s AND holder = %(holder)s;

-- name: bucket_declare
INSERT INTO rate_buckets (tenant, key, capacity, per_second, tokens, refilled_at, declared,
                          updated_by)
VALUES (%(tenant)s, %(key)s, %(capacity)s, %(per_second)s, %(capacity)s, %(now)s, true, %(by)s)
ON CONFLICT (tenant, key) DO UPDATE
SET capacity = EXCLUDED.capacity, per_second = EXCLUDED.per_second,
    tokens = LEAST(rate_buckets.tokens, EXCLUDED.capacity), declared = true,
    updated_by = EXCLUDED.updated_by;

-- name: buckets_list
SELECT key, capacity, per_second, tokens, declared, updated_by
FROM rate_buckets
WHERE tenant = %(tenant)s
ORDER BY key;

-- name: bucket_delete
DELETE FROM rate_buckets WHERE tenant = %(tenant)s AND key = %(key)s RETURNING key;
