-- The monthly partitions of events (migration 0038; docs/operations.md "Retention"). The
-- functions events_bucket, events_ensure_partition, events_drop_partition and
-- events_bucket_in_use are defined by that migration.

-- name: ensure_partitions
-- This month's partition and the next `ahead` months' (the DEFAULT partition catches a
-- commit into a month that has none, so a missed round never fails a commit).
SELECT events_partition_name(b)
FROM generate_series(events_bucket(%(now)s::timestamptz),
                     events_bucket(%(now)s::timestamptz) + %(ahead)s) AS b
WHERE events_ensure_partition(b);

-- name: partitions
-- Every month partition of events (not the DEFAULT), oldest first, with its bucket read
-- from its bound (FOR VALUES FROM (b) TO (b + 1)).
SELECT p.relname, p.bucket FROM (
    SELECT c.relname,
           substring(pg_get_expr(c.relpartbound, c.oid) FROM 'FROM \(([-0-9]+)\)')::integer
               AS bucket
    FROM pg_inherits AS i JOIN pg_class AS c ON c.oid = i.inhrelid
    WHERE i.inhparent = 'events'::regclass
) AS p
WHERE p.bucket IS NOT NULL
ORDER BY p.bucket;

-- name: bucket_in_use
SELECT events_bucket_in_use(%(bucket)s);

-- name: lock_events
-- Taken before a partition is dropped, with lock_timeout set: a drop waits for in-flight
-- commits and holds every new one behind it, so it gives up (and the rows are deleted, or
-- the drop waits for the next round) rather than stall the writers.
LOCK TABLE events IN ACCESS EXCLUSIVE MODE;

-- name: drop_partition
SELECT events_drop_partition(%(bucket)s);

-- name: lock_timeout
-- For the rest of the transaction; answers the one it replaces (to be put back).
SELECT current_setting('lock_timeout'), set_config('lock_timeout', %(timeout)s, true);
