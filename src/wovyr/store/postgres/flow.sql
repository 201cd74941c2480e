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

-- name: activity_slot_give_back
-- A slot granted to a step that did not apply, given back in the same transaction.
DELETE FROM activity_slots
WHERE tenant = %(tenant)s AND key = %(key)s AND holder = %(holder)s;

-- name: activity_slots_release
-- A slot freed wakes its key's oldest waiter not woken yet whose execution has not ended:
-- marked woken at `at`, its hold timer `flow:<seq>` (if armed already) due at `at`, and
-- the workers told; as `apply_steps` does.
WITH gone AS (
    DELETE FROM activity_slots
    WHERE tenant = %(tenant)s AND key = %(key)s AND holder = %(holder)s
    RETURNING key
), picked AS (
    SELECT w.seq, w.execution_id FROM activity_slot_waiters w
    JOIN executions x ON x.tenant = w.tenant AND x.id = w.execution_id
    WHERE w.tenant = %(tenant)s AND w.key = %(key)s AND w.woken IS NULL
      AND x.status NOT IN ('completed', 'failed', 'cancelled', 'continued')
      AND EXISTS (SELECT FROM gone)
    ORDER BY w.seq LIMIT 1
), marked AS (
    UPDATE activity_slot_waiters AS w SET woken = %(at)s FROM picked WHERE w.seq = picked.seq
), woken AS (
    UPDATE timers AS t
    SET fire_at = %(at)s
    FROM picked
    WHERE t.tenant = %(tenant)s AND t.execution_id = picked.execution_id
      AND t.timer_id LIKE 'flow:%%' AND t.fire_at > %(at)s
    RETURNING t.execution_id
)
SELECT count(pg_notify(%(channel)s, execution_id)) FROM woken;

-- name: bucket_declare
INSERT INTO rate_buckets (tenant, key, capacity, per_second, tokens, refilled_at, declared,
                          updated_by)
VALUES (%(tenant)s, %(key)s, %(capacity)s, %(per_second)s, %(capacity)s, %(now)s, true, %(by)s)
ON CONFLICT (tenant, key) DO UPDATE
SET capacity = EXCLUDED.capacity, per_second = EXCLUDED.per_second,
    tokens = LEAST(rate_buckets.tokens, EXCLUDED.capacity), declared = true,
    updated_by = EXCLUDED.updated_by;

-- name: buckets_list
SELECT key, capacity, per_second, tokens, declared, updated_by, refilled_at
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
-- The rows of every key of the batch, holders and waiters (stale ones included): only a
-- key that could be full needs them read (`activity_holders_all`, `activity_waiters_all`).
-- Holders are counted by the key's tally rows (migration 37); a key whose tally has grown
-- to more than 16 rows has them folded into one here, under the key's advisory lock (the
-- delete removes exactly the rows this statement summed: rows appended meanwhile stay).
WITH k AS (
    SELECT * FROM unnest(%(tenants)s::text[], %(keys)s::text[]) AS k(tenant, key)
), tally AS (
    SELECT k.tenant, k.key, COALESCE(sum(t.n), 0) AS n, count(t.id) AS pieces
    FROM k LEFT JOIN activity_slot_tally t ON t.tenant = k.tenant AND t.key = k.key
    GROUP BY k.tenant, k.key
), folded AS (
    DELETE FROM activity_slot_tally AS t
    USING tally
    WHERE tally.pieces > 16 AND t.tenant = tally.tenant AND t.key = tally.key
    RETURNING t.tenant, t.key, t.n
), refolded AS (
    INSERT INTO activity_slot_tally (tenant, key, n)
    SELECT tenant, key, sum(n) FROM folded GROUP BY tenant, key HAVING sum(n) <> 0
)
SELECT tally.tenant, tally.key,
       tally.n + (SELECT count(*) FROM activity_slot_waiters w
                  WHERE w.tenant = tally.tenant AND w.key = tally.key),
       EXISTS (SELECT FROM activity_slot_waiters w
               WHERE w.tenant = tally.tenant AND w.key = tally.key)
FROM tally;

-- name: activity_waiters_all
-- The attempts waiting for a slot of every key given, oldest first, that still wait (their
-- execution has not ended and they came back in time); the others are deleted on the way.
WITH k AS (
    SELECT * FROM unnest(%(tenants)s::text[], %(keys)s::text[]) AS k(tenant, key)
), waiters AS (
    SELECT w.tenant, w.key, w.holder, w.seq,
           COALESCE(w.until >= COALESCE(%(now)s::timestamptz, now())
                    AND x.status NOT IN ('completed', 'failed', 'cancelled', 'continued'),
                    false) AS live
    FROM k
    CROSS JOIN LATERAL (
        SELECT * FROM activity_slot_waiters w WHERE w.tenant = k.tenant AND w.key = k.key) w
    LEFT JOIN executions x ON x.tenant = w.tenant AND x.id = w.execution_id
), gone AS (
    DELETE FROM activity_slot_waiters AS a
    USING waiters
    WHERE NOT waiters.live
      AND a.tenant = waiters.tenant AND a.key = waiters.key AND a.holder = waiters.holder
)
SELECT tenant, key, holder FROM waiters WHERE live ORDER BY seq;

-- name: activity_waiters_leave
DELETE FROM activity_slot_waiters AS a
USING unnest(%(tenants)s::text[], %(keys)s::text[], %(holders)s::text[]) AS w(tenant, key, holder)
WHERE a.tenant = w.tenant AND a.key = w.key AND a.holder = w.holder;

-- name: activity_waiters_looked
-- Woken waiters that looked again (and were refused for another reason) are not woken any
-- more: their next hold waits its own time.
UPDATE activity_slot_waiters AS a SET woken = NULL
FROM unnest(%(tenants)s::text[], %(keys)s::text[], %(holders)s::text[]) AS w(tenant, key, holder)
WHERE a.tenant = w.tenant AND a.key = w.key AND a.holder = w.holder AND a.woken IS NOT NULL;

-- name: activity_waiters_join
-- A new waiter joins the end of its key's queue (under the key's lock); the others keep
-- their place and their `until` moves on.
INSERT INTO activity_slot_waiters (tenant, key, holder, execution_id, until)
SELECT w.tenant, w.key, w.holder, w.execution_id, %(until)s
FROM unnest(%(tenants)s::text[], %(keys)s::text[], %(holders)s::text[], %(ids)s::text[])
    WITH ORDINALITY AS w(tenant, key, holder, execution_id, n)
ORDER BY w.n
ON CONFLICT (tenant, key, holder) DO UPDATE SET until = EXCLUDED.until, woken = NULL;

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

-- name: flow_keys
-- The tenant's concurrency keys in use: workflow keys' holders and waiting executions;
-- activity keys' attempts whose slot still counts and the waiters that still wait.
SELECT 'workflow' AS kind, key, count(*) FILTER (WHERE holding) AS running,
       count(*) FILTER (WHERE NOT holding) AS waiting
FROM flow_slots WHERE tenant = %(tenant)s GROUP BY key
UNION ALL
SELECT 'activity', key, count(*) FILTER (WHERE running), count(*) FILTER (WHERE NOT running)
FROM (
    SELECT s.key, true AS running
    FROM activity_slots s
    JOIN executions x ON x.tenant = s.tenant AND x.id = s.execution_id
    WHERE s.tenant = %(tenant)s AND x.lease_owner = s.owner
      AND x.lease_until >= COALESCE(%(now)s::timestamptz, now())
    UNION ALL
    SELECT w.key, false
    FROM activity_slot_waiters w
    JOIN executions x ON x.tenant = w.tenant AND x.id = w.execution_id
    WHERE w.tenant = %(tenant)s AND w.until >= COALESCE(%(now)s::timestamptz, now())
      AND x.status NOT IN ('completed', 'failed', 'cancelled', 'continued')
) a
GROUP BY key
ORDER BY 1 DESC, 2;
