-- Named queries of flow control's activity gates (wovyr.store.postgres.flow). The gates of a
-- batch (`FlowGates`) are read and written by one call each (the functions of migration 39,
-- which take the batch's rows as one JSON document); the holders and waiters of keys that
-- could be full are read with set-based statements, one for every key of the batch.

-- name: flow_lock
SELECT wovyr_flow_lock(%(now)s::timestamptz, %(doc)s::jsonb);

-- name: flow_write
SELECT wovyr_flow_write(%(until)s::timestamptz, %(doc)s::jsonb);

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
