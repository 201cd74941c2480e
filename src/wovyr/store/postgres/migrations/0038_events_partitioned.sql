-- Schema version 38: events partitioned by the month their execution was created in, so that
-- retention drops a month's partition once no execution of that month is left, instead of
-- deleting its rows (docs/operations.md "Retention").
--
-- The partition key `bucket` is a property of the execution, not of the event: one
-- execution's events all live in one partition, and a history read (tenant, execution_id)
-- is pruned to it. `events_bucket` is the one definition (year * 12 + month - 1 of the
-- execution's created_at in UTC; Python: wovyr.store.postgres.partitions.bucket_of). Every
-- writer computes it from the executions row it inserts or updates.
--
-- The existing rows are copied in this migration's transaction (exclusive lock on events
-- for the whole copy): see docs/operations.md for the rate and what a large store does.

CREATE FUNCTION events_bucket(at timestamptz) RETURNS integer
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT (date_part('year', at AT TIME ZONE 'UTC') * 12
                  + date_part('month', at AT TIME ZONE 'UTC') - 1)::integer $$;

-- The first instant of a bucket (the lower bound of its executions' created_at).
CREATE FUNCTION events_bucket_start(bucket integer) RETURNS timestamptz
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT make_timestamp(bucket / 12, bucket % 12 + 1, 1, 0, 0, 0) AT TIME ZONE 'UTC' $$;

CREATE FUNCTION events_partition_name(bucket integer) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT format('events_%s_%s', bucket / 12, lpad((bucket % 12 + 1)::text, 2, '0')) $$;

-- Is any execution left that was created in the bucket's month (any tenant)? Served by
-- executions_by_created_at; a partition is dropped only when not.
CREATE FUNCTION events_bucket_in_use(bucket integer) RETURNS boolean
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$ SELECT EXISTS (SELECT 1 FROM executions
                         WHERE created_at >= events_bucket_start(bucket)
                           AND created_at < events_bucket_start(bucket + 1)) $$;

-- Create the bucket's partition unless it exists; rows of that month the DEFAULT partition
-- caught move into it. True when it was created. `events` itself is locked against writers
-- first (SHARE ROW EXCLUSIVE: in-flight commits end, new ones wait): ATTACH alone takes a
-- lock that commits do not wait for, so a commit that had already routed its rows to the
-- DEFAULT partition would then find the DEFAULT's new constraint refusing them.
CREATE FUNCTION events_ensure_partition(bucket integer) RETURNS boolean
    LANGUAGE plpgsql
    AS $$
DECLARE
    name text := events_partition_name(bucket);
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext('wovyr.events.partitions'), hashtext(current_schema()));
    IF to_regclass(format('%I.%I', current_schema(), name)) IS NOT NULL THEN
        RETURN false;
    END IF;
    LOCK TABLE events IN SHARE ROW EXCLUSIVE MODE;
    LOCK TABLE events_default IN ACCESS EXCLUSIVE MODE;
    EXECUTE format('CREATE TABLE %I (LIKE events)', name);
    EXECUTE format('WITH moved AS (DELETE FROM events_default WHERE bucket = $1 RETURNING *) '
                   'INSERT INTO %I SELECT * FROM moved', name) USING bucket;
    EXECUTE format('ALTER TABLE events ATTACH PARTITION %I FOR VALUES FROM (%s) TO (%s)',
                   name, bucket, bucket + 1);
    RETURN true;
END $$;

-- Detach and drop the bucket's partition when no execution of that month is left. Takes an
-- ACCESS EXCLUSIVE lock on events (held to the end of the caller's transaction), checks
-- under it, and answers whether it dropped. DETACH ... CONCURRENTLY is not used: it cannot
-- run in a transaction block, nor on a table with a DEFAULT partition.
CREATE FUNCTION events_drop_partition(bucket integer) RETURNS boolean
    LANGUAGE plpgsql
    AS $$
DECLARE
    part regclass := to_regclass(format('%I.%I', current_schema(), events_partition_name(bucket)));
BEGIN
    IF part IS NULL THEN
        RETURN false;
    END IF;
    LOCK TABLE events IN ACCESS EXCLUSIVE MODE;
    IF events_bucket_in_use(bucket)
       OR NOT EXISTS (SELECT 1 FROM pg_inherits
                      WHERE inhrelid = part AND inhparent = 'events'::regclass) THEN
        RETURN false;
    END IF;
    EXECUTE format('ALTER TABLE events DETACH PARTITION %s', part);
    EXECUTE format('DROP TABLE %s', part);
    RETURN true;
END $$;

-- One execution's events from its one partition. The bucket is looked up first and written
-- into the query as a constant, so the planner prunes before it opens any partition: a
-- bucket from a subquery is pruned only when the plan runs, after every partition's index
-- was opened and locked, which made a read cost grow with the number of months.
CREATE FUNCTION events_history(p_tenant text, p_id text, p_after bigint, p_limit bigint)
    RETURNS TABLE (seq bigint, type text, at timestamptz, data json)
    LANGUAGE plpgsql STABLE
    AS $$
DECLARE
    b integer;
BEGIN
    SELECT events_bucket(x.created_at) INTO b
    FROM executions AS x WHERE x.tenant = p_tenant AND x.id = p_id;
    IF b IS NULL THEN
        RETURN;  -- no execution: no events
    END IF;
    RETURN QUERY EXECUTE format(
        'SELECT e.seq, e.type, e.at, e.data FROM events AS e'
        ' WHERE e.tenant = $1 AND e.execution_id = $2 AND e.seq > $3 AND e.bucket = %s'
        ' ORDER BY e.seq LIMIT $4', b)
        USING p_tenant, p_id, p_after, p_limit;
END $$;

CREATE INDEX executions_by_created_at ON executions (created_at);

ALTER TABLE events RENAME TO events_unpartitioned;
ALTER TABLE events_unpartitioned RENAME CONSTRAINT events_pkey TO events_unpartitioned_pkey;

CREATE TABLE events (
    tenant       text NOT NULL,
    execution_id text NOT NULL,
    seq          bigint NOT NULL,
    type         text NOT NULL,
    at           timestamptz NOT NULL,
    data         json NOT NULL,
    bucket       integer NOT NULL
) PARTITION BY RANGE (bucket);
CREATE TABLE events_default PARTITION OF events DEFAULT;

-- One partition per month some execution was created in, and this month and the next two.
SELECT events_ensure_partition(b)
FROM (SELECT DISTINCT events_bucket(created_at) AS b FROM executions
      UNION
      SELECT events_bucket(now()) + n FROM generate_series(0, 2) AS n) AS months
ORDER BY b;

-- Events of an execution that is gone (none should exist) keep their own month.
INSERT INTO events (tenant, execution_id, seq, type, at, data, bucket)
SELECT e.tenant, e.execution_id, e.seq, e.type, e.at, e.data,
       COALESCE(events_bucket(x.created_at), events_bucket(e.at))
FROM events_unpartitioned AS e
LEFT JOIN executions AS x ON x.tenant = e.tenant AND x.id = e.execution_id;

-- The key is built after the copy (one sort per partition, not one index insert per row).
ALTER TABLE events ADD PRIMARY KEY (tenant, execution_id, seq, bucket);
DROP TABLE events_unpartitioned;
