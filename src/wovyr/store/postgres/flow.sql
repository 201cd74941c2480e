-- Named queries of flow control's activity gates (wovyr.store.postgres.flow). The gates of a
-- batch (`FlowGates`) use set-based forms: one statement for every bucket or slot key of the
-- batch, all sent in one round trip.

-- name: flow_now
SELECT COALESCE(%(now)s::timestamptz, now());

-- name: activity_holders_now
SELECT s.holder
FROM activity_slots s
JOIN executions x ON x.tenant = s.tenant AND x.id = s.execution_id
WHERE s.tenant = %(tenant)s AND s.key = %(key)s AND x.lease_owner = s.owner
  AND x.lease_until >= COALESCE(%(now)s::timestamptz, now())
ORDER BY s.holder;

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

-- name: buckets_create
-- Missing buckets an activity names with its own numbers start full.
INSERT INTO rate_buckets (tenant, key, capacity, per_second, tokens, refilled_at)
SELECT b.tenant, b.key, b.capacity, b.per_second, b.capacity,
       COALESCE(%(now)s::timestamptz, now())
FROM unnest(%(tenants)s::text[], %(keys)s::text[], %(capacities)s::float8[],
            %(rates)s::float8[]) AS b(tenant, key, capacity, per_second)
ON CONFLICT (tenant, key) DO NOTHING;

-- name: buckets_lock_all
SELECT b.tenant, b.key, b.capacity, b.per_second, b.tokens, b.refilled_at, b.wake_at, b.declared
FROM rate_buckets b
JOIN unnest(%(tenants)s::text[], %(keys)s::text[]) AS k(tenant, key)
  ON b.tenant = k.tenant AND b.key = k.key
ORDER BY b.tenant, b.key
FOR UPDATE OF b;

-- name: activity_slots_lock_all
-- The keys come sorted; output expressions are evaluated after the ORDER BY, so the locks
-- are taken in that order (no two batches wait on each other in a cycle).
SELECT pg_advisory_xact_lock(hashtext('wovyr.activity-slot.' || k.tenant), hashtext(k.key))
FROM unnest(%(tenants)s::text[], %(keys)s::text[]) WITH ORDINALITY AS k(tenant, key, n)
ORDER BY k.n;

-- name: activity_slot_counts
-- The rows of every key of the batch (stale ones included): only a key that could be full
-- needs its holders read (`activity_holders_all`).
SELECT s.tenant, s.key, count(*)
FROM unnest(%(tenants)s::text[], %(keys)s::text[]) AS k(tenant, key)
JOIN activity_slots s ON s.tenant = k.tenant AND s.key = k.key
GROUP BY s.tenant, s.key;

-- name: activity_holders_all
-- The holders of every key of the batch whose execution's lease is still their worker's;
-- the others' rows (a crashed or replaced worker's) are deleted on the way (the select
-- sees the rows as they were before: it keeps exactly the complement). Key by key, each
-- holder's execution looked up by its key: the plan stays small whatever the statistics.
WITH k AS (
    SELECT * FROM unnest(%(tenants)s::text[], %(keys)s::text[]) AS k(tenant, key)
), slots AS (
    -- joined on the execution's key alone: a worker's leases are many (no owner index)
    SELECT s.tenant, s.key, s.holder,
           COALESCE(x.lease_owner = s.owner
                    AND x.lease_until >= COALESCE(%(now)s::timestamptz, now()), false) AS live
    FROM k
    CROSS JOIN LATERAL (
        SELECT * FROM activity_slots s WHERE s.tenant = k.tenant AND s.key = k.key) s
    LEFT JOIN executions x ON x.tenant = s.tenant AND x.id = s.execution_id
), stale AS (
    DELETE FROM activity_slots AS a
    USING slots
    WHERE NOT slots.live
      AND a.tenant = slots.tenant AND a.key = slots.key AND a.holder = slots.holder
)
SELECT tenant, key, holder FROM slots WHERE live ORDER BY tenant, key, holder;

-- name: activity_slots_take
INSERT INTO activity_slots (tenant, key, holder, execution_id, owner)
SELECT * FROM unnest(%(tenants)s::text[], %(keys)s::text[], %(holders)s::text[],
                     %(ids)s::text[], %(owners)s::text[])
ON CONFLICT (tenant, key, holder) DO UPDATE SET execution_id = EXCLUDED.execution_id,
    owner = EXCLUDED.owner;

-- name: buckets_write
UPDATE rate_buckets AS b
SET capacity = w.capacity, per_second = w.per_second, tokens = w.tokens,
    refilled_at = w.refilled_at, wake_at = w.wake_at
FROM unnest(%(tenants)s::text[], %(keys)s::text[], %(capacities)s::float8[],
            %(rates)s::float8[], %(tokens)s::float8[], %(refilled)s::timestamptz[],
            %(wakes)s::timestamptz[])
     AS w(tenant, key, capacity, per_second, tokens, refilled_at, wake_at)
WHERE b.tenant = w.tenant AND b.key = w.key;
