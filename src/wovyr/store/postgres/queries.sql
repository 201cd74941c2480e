-- Named queries of the PostgreSQL store, loaded by wovyr.store.postgres.queries.
-- Each block starts with `-- name: <name>`; parameters are psycopg's %(name)s.
--
-- Time: `%(now)s` is the engine clock's time; it is NULL when the store runs with
-- db_clock=True, and then `COALESCE(%(now)s, now())` takes the database's clock, so every
-- worker on every host measures leases against one clock.
--
-- Optional filters are written `(%(x)s IS NULL OR column = %(x)s)`. Such queries are run
-- unprepared (planned with the actual values, which folds the NULL tests away) when an
-- index choice depends on them (list_executions).

-- name: create_execution
-- Insert the execution with its first step; a known id inserts nothing (idempotent start).
-- A lease given as a duration (db_clock) starts at the database's now().
WITH created AS (
    INSERT INTO executions (
        id, tenant, workflow, version, definition_hash, status, created_at, updated_at,
        parent_id, seq, ready, lease_owner, lease_until, fence, shard, waiting_on,
        input, output, error, checkpoint, rerun_of, labels, priority, claim_rank)
    VALUES (
        %(id)s, %(tenant)s, %(workflow)s, %(version)s, %(definition_hash)s, %(status)s,
        %(created_at)s, %(updated_at)s, %(parent_id)s,
        cardinality(%(ev_type)b::text[]), %(ready)s, %(lease_owner)s,
        COALESCE(now() + %(lease_for)s::interval, %(lease_until)s::timestamptz),
        %(fence)s, %(shard)s, %(waiting_on)s,
        %(input)s::json, %(output)s::json, %(error)s::json, %(checkpoint)s::json,
        %(rerun_of)s::text, %(labels)s::jsonb, %(priority)s, %(claim_rank)s)
    ON CONFLICT (tenant, id) DO NOTHING
    RETURNING id, tenant, workflow, version, definition_hash, status, created_at, updated_at,
        seq, parent_id, waiting_on, input, output, error, ready, lease_owner, lease_until,
        fence, checkpoint, ready AND lease_owner IS NULL AS claimable
), appended AS (
    INSERT INTO events (tenant, execution_id, seq, type, at, data, bucket)
    SELECT created.tenant, created.id, e.n, e.type, e.at, e.data::json,
           events_bucket(created.created_at)
    FROM created,
        unnest(%(ev_type)b::text[], %(ev_at)b::timestamptz[], %(ev_data)b::text[])
            WITH ORDINALITY AS e(type, at, data, n)
), armed AS (
    INSERT INTO timers (tenant, execution_id, timer_id, fire_at)
    SELECT created.tenant, created.id, t.timer_id, t.fire_at
    FROM created, unnest(%(armed_id)b::text[], %(armed_at)b::timestamptz[]) AS t(timer_id, fire_at)
    ON CONFLICT (tenant, execution_id, timer_id) DO UPDATE SET fire_at = EXCLUDED.fire_at
), labelled AS (
    -- one search row per label (none without labels: jsonb_each_text(NULL) has no rows)
    INSERT INTO execution_labels (tenant, key, value, created_at, execution_id)
    SELECT created.tenant, l.key, l.value, created.created_at, created.id
    FROM created, jsonb_each_text(%(labels)s::jsonb) AS l(key, value)
)
-- The new row (no row: the tenant had the id), announced when it can be claimed.
SELECT id, tenant, workflow, version, definition_hash, status, created_at, updated_at, seq,
       parent_id, waiting_on, input, output, error, ready, lease_owner, lease_until, fence,
       checkpoint,
       (SELECT count(*) FROM (SELECT pg_notify(%(channel)s, id) FROM created WHERE claimable) n)
FROM created;

-- name: apply_step
-- One step of one execution, checked on its own: it applies only while the sequence (and,
-- when given, the lease fence) still holds. Returns how many rows it changed (0 or 1) and,
-- for a refused step, the row's seq and fence as of this statement's snapshot.
-- An execution left ready and unleased is announced on the store's channel (wovyr_ready).
WITH step AS (
    UPDATE executions
    SET seq = %(expected_seq)s::bigint + cardinality(%(ev_type)b::text[]),
        status = %(status)s,
        updated_at = %(updated_at)s,
        -- null with a delta: the base stays (its TOAST value is not written again)
        checkpoint = COALESCE(%(checkpoint)s::json, checkpoint),
        -- waiting for a concurrency slot: not ready (and still waiting) until handed one
        ready = %(ready)s AND flow_wait IS NULL,
        waiting_on = CASE WHEN flow_wait IS NULL THEN %(waiting_on)s ELSE waiting_on END,
        output = %(output)s::json,
        error = %(error)s::json,
        lease_owner = CASE WHEN %(release)s THEN NULL ELSE lease_owner END,
        lease_until = CASE WHEN %(release)s THEN NULL ELSE lease_until END
    WHERE tenant = %(tenant)s AND id = %(id)s
      AND seq = %(expected_seq)s::bigint
      AND (%(fence)s::bigint IS NULL OR fence = %(fence)s::bigint)
    RETURNING tenant, id, ready AND lease_owner IS NULL AS claimable,
        events_bucket(created_at) AS bucket
), delta AS (
    INSERT INTO checkpoint_deltas (tenant, execution_id, seq, body)
    SELECT step.tenant, step.id, %(expected_seq)s::bigint + cardinality(%(ev_type)b::text[]),
           %(delta)s::json
    FROM step WHERE %(delta)s::text IS NOT NULL
), compacted AS (
    -- a whole checkpoint: the deltas on the old base go
    DELETE FROM checkpoint_deltas AS d USING step
    WHERE %(delta)s::text IS NULL AND d.tenant = step.tenant AND d.execution_id = step.id
), appended AS (
    INSERT INTO events (tenant, execution_id, seq, type, at, data, bucket)
    SELECT step.tenant, step.id, %(expected_seq)s::bigint + e.n, e.type, e.at, e.data::json,
           step.bucket
    FROM step,
        unnest(%(ev_type)b::text[], %(ev_at)b::timestamptz[], %(ev_data)b::text[])
            WITH ORDINALITY AS e(type, at, data, n)
), removed AS (
    DELETE FROM timers USING step
    WHERE timers.tenant = step.tenant AND timers.execution_id = step.id
      AND timers.timer_id = ANY(%(removed)b::text[])
), armed AS (
    -- a flow hold armed after a freed slot woke its waiter (the wake found no timer to
    -- move) is due at once
    INSERT INTO timers (tenant, execution_id, timer_id, fire_at)
    SELECT step.tenant, step.id, t.timer_id,
           CASE WHEN t.timer_id LIKE 'flow:%%' AND EXISTS (
                    SELECT FROM activity_slot_waiters w
                    WHERE w.tenant = step.tenant AND w.execution_id = step.id
                      AND w.woken IS NOT NULL)
                THEN LEAST(t.fire_at, %(updated_at)s) ELSE t.fire_at END
    FROM step, unnest(%(armed_id)b::text[], %(armed_at)b::timestamptz[]) AS t(timer_id, fire_at)
    ON CONFLICT (tenant, execution_id, timer_id) DO UPDATE SET fire_at = EXCLUDED.fire_at
)
SELECT
    (SELECT count(*) FROM step),
    x.seq,
    x.fence,
    (SELECT count(*) FROM (SELECT pg_notify(%(channel)s, id) FROM step WHERE claimable) n)
FROM (VALUES (1)) AS one
LEFT JOIN executions AS x ON x.tenant = %(tenant)s AND x.id = %(id)s;

-- name: seq_and_fence
SELECT seq, fence FROM executions WHERE tenant = %(tenant)s AND id = %(id)s;

-- name: load
SELECT id, tenant, workflow, version, definition_hash, status, created_at, updated_at, seq,
       parent_id, waiting_on, input, output, error, ready, lease_owner, lease_until, fence,
       checkpoint, labels,
       (SELECT json_agg(d.body ORDER BY d.seq) FROM checkpoint_deltas AS d
        WHERE d.tenant = executions.tenant AND d.execution_id = executions.id) AS checkpoint_deltas
FROM executions
WHERE tenant = %(tenant)s AND id = %(id)s;

-- name: list_executions
-- Keyset pagination on (created_at, id) DESC; run unprepared so that the indexes
-- executions_by_{created,status,workflow} (and executions_waiting) serve the filters actually
-- given, and the primary key (tenant, id) an id prefix (a range, checked by starts_with).
SELECT id, tenant, workflow, version, definition_hash, status, created_at, updated_at, seq,
       parent_id, waiting_on, input, output, error, ready, lease_owner, lease_until, fence,
       labels, NULL::json AS checkpoint
FROM executions
WHERE (%(tenant)s::text IS NULL OR tenant = %(tenant)s::text)
  AND (%(workflow)s::text IS NULL OR workflow = %(workflow)s::text)
  AND (%(status)s::text IS NULL OR status = %(status)s::text)
  AND (%(waiting)s::boolean IS NULL OR (waiting_on IS NOT NULL) = %(waiting)s::boolean)
  AND (%(parent_id)s::text IS NULL OR parent_id = %(parent_id)s::text)
  AND (%(rerun_of)s::text IS NULL OR rerun_of = %(rerun_of)s::text)
  AND (%(id_prefix)s::text IS NULL OR (id >= %(id_prefix)s::text AND id < %(id_upto)s::text
       AND starts_with(id, %(id_prefix)s::text)))
  AND (%(created_after)s::timestamptz IS NULL OR created_at >= %(created_after)s::timestamptz)
  AND (%(created_before)s::timestamptz IS NULL OR created_at < %(created_before)s::timestamptz)
  AND (%(cursor_at)s::timestamptz IS NULL
       OR (created_at, id) < (%(cursor_at)s::timestamptz, %(cursor_id)s::text))
ORDER BY created_at DESC, id DESC
LIMIT %(limit)s;

-- name: list_by_label
-- A page of the executions with a label: walks that label's rows of execution_labels
-- (primary key order: newest first) and checks the other filters on each execution (the
-- other labels on its labels column).
SELECT e.id, e.tenant, e.workflow, e.version, e.definition_hash, e.status, e.created_at,
       e.updated_at, e.seq, e.parent_id, e.waiting_on, e.input, e.output, e.error, e.ready,
       e.lease_owner, e.lease_until, e.fence, e.labels, NULL::json AS checkpoint
FROM execution_labels l
JOIN executions e ON e.tenant = l.tenant AND e.id = l.execution_id
WHERE (%(tenant)s::text IS NULL OR l.tenant = %(tenant)s::text)
  AND l.key = %(label_key)s::text AND l.value = %(label_value)s::text
  AND (%(more_labels)s::jsonb IS NULL OR e.labels @> %(more_labels)s::jsonb)
  AND (%(workflow)s::text IS NULL OR e.workflow = %(workflow)s::text)
  AND (%(workflows)s::text[] IS NULL OR e.workflow = ANY(%(workflows)s::text[]))
  AND (%(status)s::text IS NULL OR e.status = %(status)s::text)
  AND (%(waiting)s::boolean IS NULL OR (e.waiting_on IS NOT NULL) = %(waiting)s::boolean)
  AND (%(parent_id)s::text IS NULL OR e.parent_id = %(parent_id)s::text)
  AND (%(rerun_of)s::text IS NULL OR e.rerun_of = %(rerun_of)s::text)
  AND (%(id_prefix)s::text IS NULL OR starts_with(e.id, %(id_prefix)s::text))
  AND (%(created_after)s::timestamptz IS NULL OR l.created_at >= %(created_after)s::timestamptz)
  AND (%(created_before)s::timestamptz IS NULL OR l.created_at < %(created_before)s::timestamptz)
  AND (%(cursor_at)s::timestamptz IS NULL
       OR (l.created_at, l.execution_id) < (%(cursor_at)s::timestamptz, %(cursor_id)s::text))
ORDER BY l.created_at DESC, l.execution_id DESC
LIMIT %(limit)s;

-- name: list_by_workflows
-- A page of the executions of any of several workflows (a name search's matches): one page
-- of each from its executions_by_workflow range (LATERAL), merged.
SELECT e.* FROM unnest(%(workflows)s::text[]) AS w(name)
CROSS JOIN LATERAL (
    SELECT id, tenant, workflow, version, definition_hash, status, created_at, updated_at,
           seq, parent_id, waiting_on, input, output, error, ready, lease_owner, lease_until,
           fence, labels, NULL::json AS checkpoint
    FROM executions
    WHERE (%(tenant)s::text IS NULL OR tenant = %(tenant)s::text)
      AND workflow = w.name
      AND (%(status)s::text IS NULL OR status = %(status)s::text)
      AND (%(waiting)s::boolean IS NULL OR (waiting_on IS NOT NULL) = %(waiting)s::boolean)
      AND (%(parent_id)s::text IS NULL OR parent_id = %(parent_id)s::text)
      AND (%(rerun_of)s::text IS NULL OR rerun_of = %(rerun_of)s::text)
      AND (%(id_prefix)s::text IS NULL OR starts_with(id, %(id_prefix)s::text))
      AND (%(created_after)s::timestamptz IS NULL
           OR created_at >= %(created_after)s::timestamptz)
      AND (%(created_before)s::timestamptz IS NULL
           OR created_at < %(created_before)s::timestamptz)
      AND (%(cursor_at)s::timestamptz IS NULL
           OR (created_at, id) < (%(cursor_at)s::timestamptz, %(cursor_id)s::text))
    ORDER BY created_at DESC, id DESC
    LIMIT %(limit)s
) e
ORDER BY e.created_at DESC, e.id DESC
LIMIT %(limit)s;

-- name: leased
-- The SET of a claim: the lease to `owner` from now (the database's with db_clock), the
-- fence bumped.
lease_owner = %(owner)s,
    lease_until = COALESCE(%(now)s::timestamptz, now()) + %(lease)s::interval,
    fence = x.fence + 1

-- name: claimed
-- What a claim returns of each execution it leased (`wovyr.store.rows.claim_record`).
x.id, x.fence, x.seq, x.checkpoint, x.definition_hash, x.tenant,
    (SELECT json_agg(d.body ORDER BY d.seq) FROM checkpoint_deltas AS d
        WHERE d.tenant = x.tenant AND d.execution_id = x.id) AS checkpoint_deltas

-- name: ready_tenants
-- The tenants with ready work, skipping through executions_ready_by_tenant (one index probe
-- per tenant, however long a tenant's backlog).
tenants AS (
    (SELECT tenant FROM executions WHERE ready ORDER BY tenant LIMIT 1)
    UNION ALL
    SELECT (SELECT e.tenant FROM executions e
            WHERE e.ready AND e.tenant > t.tenant ORDER BY e.tenant LIMIT 1)
    FROM tenants t
    WHERE t.tenant IS NOT NULL
)

-- name: claimable_e
-- An execution `e` (ready) that a claim may lease: its lease free or passed, in the shards.
(e.lease_until IS NULL OR e.lease_until < COALESCE(%(now)s::timestamptz, now()))
          AND (%(shards)b::integer[] IS NULL OR e.shard = ANY(%(shards)b::integer[]))

-- name: tenant_claimable
-- The claimable executions `e` of the tenant `s.tenant`, in claim order.
FROM executions e
        WHERE e.ready AND e.tenant = s.tenant AND {claimable_e}
        ORDER BY e.lease_until NULLS FIRST, e.claim_rank

-- name: claim
-- The claim is one statement: lock up to `limit` claimable rows nobody else is locking
-- (SKIP LOCKED: claimers never wait on each other), lease them and bump their fence.
-- FOR UPDATE re-checks a row that changed after the snapshot, so no row is claimed twice.
UPDATE executions AS x SET {leased}
WHERE (x.tenant, x.id) IN (
    SELECT tenant, id
    FROM executions
    WHERE ready
      AND (lease_until IS NULL OR lease_until < COALESCE(%(now)s::timestamptz, now()))
      AND (%(only)b::text[] IS NULL OR (tenant = %(tenant)s AND id = ANY(%(only)b::text[])))
      AND (%(shards)b::integer[] IS NULL OR shard = ANY(%(shards)b::integer[]))
    ORDER BY lease_until NULLS FIRST, claim_rank
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED)
RETURNING {claimed};

-- name: claim_fair
-- The fair claim (see `FairShare`), still one statement. `tenants` finds the tenants with
-- ready work by skipping through executions_ready_by_tenant (one index probe per tenant,
-- however long a tenant's backlog); `shares` keeps those with a claimable row (a probe each:
-- claimable rows come first in a tenant's part of that index). Each tenant's first `room`
-- claimable rows are locked there with SKIP LOCKED, room being its turn (`FairShare.rooms`:
-- ceil(S * weight) - held, S = (limit + the slots they hold) / (their weights); so a claim
-- reads about `limit` rows however long the backlogs), within the limit and its cap.
-- Rank k of a tenant scores (held + k) / weight; the lowest `limit` scores are leased.
WITH RECURSIVE {ready_tenants}, shares AS (
    SELECT t.tenant, COALESCE(s.held, 0) AS held, COALESCE(s.weight, 1.0) AS weight
    FROM tenants t
    LEFT JOIN unnest(%(tenants)b::text[], %(held)b::integer[], %(weights)b::float8[])
        AS s(tenant, held, weight) USING (tenant)
    WHERE t.tenant IS NOT NULL
      AND EXISTS (
          SELECT FROM executions e
          WHERE e.ready
            AND e.tenant = t.tenant
            AND {claimable_e})
), turns AS (
    SELECT s.*,
           GREATEST(0, LEAST(%(limit)s, COALESCE(%(cap)s::integer - s.held, %(limit)s),
               ceil((%(limit)s + sum(s.held) OVER ()) / sum(s.weight) OVER () * s.weight)::integer
               - s.held)) AS room
    FROM shares s
), candidates AS (
    SELECT c.tenant, c.id, c.lease_until, c.claim_rank,
           (s.held + row_number() OVER (PARTITION BY c.tenant
                                        ORDER BY c.lease_until NULLS FIRST, c.claim_rank, c.id))
               / s.weight
               AS score
    FROM turns s
    CROSS JOIN LATERAL (
        SELECT e.tenant, e.id, e.lease_until, e.claim_rank
        {tenant_claimable}
        LIMIT s.room
        FOR UPDATE SKIP LOCKED) c
)
UPDATE executions AS x SET {leased}
WHERE (x.tenant, x.id) IN (
    SELECT tenant, id FROM candidates
    ORDER BY score, lease_until NULLS FIRST, claim_rank, tenant, id
    LIMIT %(limit)s)
RETURNING {claimed};

-- name: claim_turns
-- The claim by turns (`FairShare.turns`, decided by the caller): each named tenant's first
-- `room` claimable rows, locked with SKIP LOCKED from executions_ready_by_tenant (one
-- index probe per tenant, no look for tenants), at most `limit` in all.
UPDATE executions AS x SET {leased}
WHERE (x.tenant, x.id) IN (
    SELECT c.tenant, c.id
    FROM unnest(%(tenants)b::text[], %(rooms)b::integer[]) AS s(tenant, room)
    CROSS JOIN LATERAL (
        SELECT e.tenant, e.id
        {tenant_claimable}
        LIMIT s.room
        FOR UPDATE SKIP LOCKED) c
    LIMIT %(limit)s)
RETURNING {claimed};

-- name: leased_lock
-- Serialises the claims of one tenant with a cap on its leased executions (`max_running`):
-- held to the end of the claim's transaction, so the next claim's count sees its leases.
SELECT pg_advisory_xact_lock(hashtext('wovyr.leased'), hashtext(%(tenant)s));

-- name: claim_turns_capped
-- The claim by turns where some tenants have a `max_running` (NULL: none): such a tenant's
-- room is at most its cap less its live leases, counted on executions_ready_by_tenant (a
-- leased execution is ready). Run after `leased_lock` of each of them, in the same
-- transaction: this statement's snapshot then holds every earlier claim of theirs.
UPDATE executions AS x SET {leased}
WHERE (x.tenant, x.id) IN (
    SELECT c.tenant, c.id
    FROM unnest(%(tenants)b::text[], %(rooms)b::integer[], %(caps)b::integer[])
        AS s(tenant, room, cap)
    CROSS JOIN LATERAL (
        SELECT e.tenant, e.id
        {tenant_claimable}
        LIMIT CASE WHEN s.cap IS NULL THEN s.room ELSE GREATEST(0, LEAST(s.room, s.cap - (
            SELECT count(*) FROM executions l
            WHERE l.ready
              AND l.tenant = s.tenant
              AND l.lease_until >= COALESCE(%(now)s::timestamptz, now())))::integer) END
        FOR UPDATE SKIP LOCKED) c
    LIMIT %(limit)s)
RETURNING {claimed};

-- name: claimable_tenants
-- The tenants with claimable work: skip through executions_ready_by_tenant (one probe per
-- tenant with ready work), then one probe each for a claimable row.
WITH RECURSIVE {ready_tenants}
SELECT t.tenant
FROM tenants t
WHERE t.tenant IS NOT NULL
  AND EXISTS (
      SELECT FROM executions e
      WHERE e.ready
        AND e.tenant = t.tenant
        AND {claimable_e});

-- name: release_owner
-- Released executions that are still ready become claimable: announce them.
WITH released AS (
    UPDATE executions
    SET lease_owner = NULL, lease_until = NULL
    WHERE lease_owner = %(owner)s
    RETURNING id, ready
)
SELECT
    (SELECT count(*) FROM released),
    (SELECT count(*) FROM (SELECT pg_notify(%(channel)s, id) FROM released WHERE ready) n);

-- name: ready_count
SELECT count(*)
FROM executions
WHERE ready AND (lease_until IS NULL OR lease_until < COALESCE(%(now)s::timestamptz, now()));

-- name: due_timers
SELECT tenant, execution_id, timer_id, fire_at
FROM timers
WHERE fire_at <= %(now)s
ORDER BY fire_at, tenant, execution_id, timer_id
LIMIT %(limit)s;

-- name: any_due_timer
SELECT 1 FROM timers WHERE fire_at <= %(now)s LIMIT 1;

-- name: lock_due_timers
-- The due timers no other dispatcher holds, locked until this transaction ends (it fires
-- them): concurrent dispatchers split the due rows instead of racing for the same ones.
SELECT tenant, execution_id, timer_id, fire_at
FROM timers
WHERE fire_at <= %(now)s
ORDER BY fire_at, tenant, execution_id, timer_id
LIMIT %(limit)s
FOR UPDATE SKIP LOCKED;

-- name: load_many
SELECT id, tenant, workflow, version, definition_hash, status, created_at, updated_at, seq,
       parent_id, waiting_on, input, output, error, ready, lease_owner, lease_until, fence,
       checkpoint,
       (SELECT json_agg(d.body ORDER BY d.seq) FROM checkpoint_deltas AS d
        WHERE d.tenant = executions.tenant AND d.execution_id = executions.id) AS checkpoint_deltas
FROM executions
WHERE (tenant, id) IN (SELECT * FROM unnest(%(tenants)s::text[], %(ids)s::text[]));

-- name: next_timer_at
SELECT min(fire_at) FROM timers;

-- name: migrations_lock
-- Concurrent start-ups migrate one at a time (per schema); the lock ends with the transaction.
SELECT pg_advisory_xact_lock(hashtext('wovyr.migrate.' || current_schema()));

-- name: migrations_table
CREATE TABLE IF NOT EXISTS wovyr_schema_migrations (
    version    integer PRIMARY KEY,
    applied_at timestamptz NOT NULL DEFAULT now()
);

-- name: migrations_applied
SELECT version FROM wovyr_schema_migrations ORDER BY version;

-- name: migration_done
INSERT INTO wovyr_schema_migrations (version) VALUES (%(version)s);

-- name: migrations_table_exists
SELECT to_regclass('wovyr_schema_migrations') IS NOT NULL;

-- name: schema_version
SELECT coalesce(max(version), 0) FROM wovyr_schema_migrations;

-- name: current_schema
SELECT current_schema();

-- name: listen
-- {channel} is filled in as a quoted identifier (LISTEN takes no parameters).
LISTEN {channel};

-- name: member_heartbeat
-- One statement: upsert this worker's row, drop the members whose heartbeat expired and
-- return the live workers, sorted (this one included). The CTEs see the snapshot taken
-- before the statement, hence the UNION with the row just written.
WITH me AS (
    INSERT INTO worker_members (owner, joined_at, last_seen, mode, partition_count, partitions)
    VALUES (%(owner)s, COALESCE(%(now)s::timestamptz, now()),
            COALESCE(%(now)s::timestamptz, now()), %(mode)s, %(of)s, %(partitions)s)
    ON CONFLICT (owner) DO UPDATE
    SET last_seen = EXCLUDED.last_seen, mode = EXCLUDED.mode,
        partition_count = EXCLUDED.partition_count, partitions = EXCLUDED.partitions
    RETURNING owner, mode, partition_count, partitions
), expired AS (
    DELETE FROM worker_members
    WHERE last_seen < COALESCE(%(now)s::timestamptz, now()) - %(ttl)s::interval
      AND owner <> %(owner)s
)
SELECT owner, mode, partition_count, partitions FROM worker_members
WHERE last_seen >= COALESCE(%(now)s::timestamptz, now()) - %(ttl)s::interval
  AND owner <> %(owner)s
UNION ALL
SELECT owner, mode, partition_count, partitions FROM me
ORDER BY 1;

-- name: member_leave
DELETE FROM worker_members WHERE owner = %(owner)s;

-- name: members
SELECT owner, joined_at, last_seen, mode
FROM worker_members
WHERE last_seen >= COALESCE(%(now)s::timestamptz, now()) - %(ttl)s::interval
ORDER BY owner;

-- name: apply_steps
-- A batch of steps of DIFFERENT executions in one statement (set-based: one plan, one
-- round of parameter adaptation, instead of one apply_step per step). Each step is still
-- checked on its own (seq and, when given, fence); the answer has one row per step, in
-- order: (applied, seq, fence) as apply_step answers. Events, timers removed, timers
-- armed and activity slots released come flattened, each row tagged with the ordinal
-- (1-based) of its step.
WITH s AS (
    SELECT *
    FROM unnest(
        %(tenant)b::text[], %(id)b::text[], %(expected_seq)b::bigint[], %(fence)b::bigint[], %(status)b::text[],
        %(updated_at)b::timestamptz[], %(checkpoint)b::text[], %(delta)b::text[],
        %(ready)b::boolean[], %(waiting_on)b::text[], %(output)b::text[], %(error)b::text[],
        %(release)b::boolean[], %(events)b::integer[])
        WITH ORDINALITY AS s(tenant, id, expected_seq, fence, status, updated_at, checkpoint,
                             delta, ready, waiting_on, output, error, release, events, i)
), step AS (
    UPDATE executions AS x
    SET seq = s.expected_seq + s.events,
        status = s.status,
        updated_at = s.updated_at,
        checkpoint = COALESCE(s.checkpoint::json, x.checkpoint),  -- null: a delta (below)
        ready = s.ready AND x.flow_wait IS NULL,
        waiting_on = CASE WHEN x.flow_wait IS NULL THEN s.waiting_on ELSE x.waiting_on END,
        output = s.output::json,
        error = s.error::json,
        lease_owner = CASE WHEN s.release THEN NULL ELSE x.lease_owner END,
        lease_until = CASE WHEN s.release THEN NULL ELSE x.lease_until END
    FROM s
    WHERE x.tenant = s.tenant AND x.id = s.id
      AND x.seq = s.expected_seq
      AND (s.fence IS NULL OR x.fence = s.fence)
    RETURNING x.tenant, x.id, s.i, s.expected_seq, x.ready AND x.lease_owner IS NULL AS claimable,
        events_bucket(x.created_at) AS bucket
), delta AS (
    INSERT INTO checkpoint_deltas (tenant, execution_id, seq, body)
    SELECT step.tenant, step.id, step.expected_seq + s.events, s.delta::json
    FROM step JOIN s ON s.i = step.i
    WHERE s.delta IS NOT NULL
), compacted AS (
    -- a whole checkpoint: the deltas on the old base go
    DELETE FROM checkpoint_deltas AS d
    USING step JOIN s ON s.i = step.i
    WHERE s.delta IS NULL AND d.tenant = step.tenant AND d.execution_id = step.id
), freed AS (
    -- per key, the activity slots freed by steps that applied (and the latest step time)
    SELECT step.tenant, r.key, count(*) AS n, max(s.updated_at) AS at
    FROM step
    JOIN s ON s.i = step.i
    JOIN unnest(%(rel_step)b::bigint[], %(rel_key)b::text[]) AS r(i, key) ON r.i = step.i
    GROUP BY step.tenant, r.key
), picked AS (
    -- each slot freed wakes its key's oldest waiter not woken yet whose execution has not
    -- ended: the timer holding it (`flow:<seq>`) fires now instead of at its recheck
    SELECT q.seq, freed.tenant, q.execution_id, freed.at
    FROM freed
    CROSS JOIN LATERAL (
        SELECT w.seq, w.execution_id FROM activity_slot_waiters w
        JOIN executions x ON x.tenant = w.tenant AND x.id = w.execution_id
        WHERE w.tenant = freed.tenant AND w.key = freed.key AND w.woken IS NULL
          AND x.status NOT IN ('completed', 'failed', 'cancelled', 'continued')
        ORDER BY w.seq LIMIT freed.n) q
), marked AS (
    UPDATE activity_slot_waiters AS w SET woken = picked.at FROM picked WHERE w.seq = picked.seq
), woken AS (
    UPDATE timers AS t
    SET fire_at = picked.at
    FROM picked
    WHERE t.tenant = picked.tenant AND t.execution_id = picked.execution_id
      AND t.timer_id LIKE 'flow:%%' AND t.fire_at > picked.at
    RETURNING t.execution_id
), appended AS (
    INSERT INTO events (tenant, execution_id, seq, type, at, data, bucket)
    SELECT step.tenant, step.id, step.expected_seq + e.n, e.type, e.at, e.data::json,
           step.bucket
    FROM unnest(%(ev_step)b::bigint[], %(ev_n)b::bigint[], %(ev_type)b::text[],
                %(ev_at)b::timestamptz[], %(ev_data)b::text[]) AS e(i, n, type, at, data)
    JOIN step ON step.i = e.i
), removed AS (
    DELETE FROM timers AS t
    USING step, unnest(%(rm_step)b::bigint[], %(rm_timer)b::text[]) AS r(i, timer_id)
    WHERE r.i = step.i AND t.tenant = step.tenant AND t.execution_id = step.id
      AND t.timer_id = r.timer_id
), armed AS (
    -- a flow hold armed after a freed slot woke its waiter (here or before) is due at once
    INSERT INTO timers (tenant, execution_id, timer_id, fire_at)
    SELECT step.tenant, step.id, a.timer_id,
           CASE WHEN a.timer_id LIKE 'flow:%%' AND (
                    EXISTS (SELECT FROM activity_slot_waiters w
                            WHERE w.tenant = step.tenant AND w.execution_id = step.id
                              AND w.woken IS NOT NULL)
                    OR EXISTS (SELECT FROM picked
                               WHERE picked.tenant = step.tenant
                                 AND picked.execution_id = step.id))
                THEN LEAST(a.fire_at, s.updated_at) ELSE a.fire_at END
    FROM unnest(%(arm_step)b::bigint[], %(arm_timer)b::text[], %(arm_at)b::timestamptz[])
        AS a(i, timer_id, fire_at)
    JOIN step ON step.i = a.i
    JOIN s ON s.i = a.i
    ON CONFLICT (tenant, execution_id, timer_id) DO UPDATE SET fire_at = EXCLUDED.fire_at
), released AS (
    -- the activity concurrency slots of the attempts whose results the steps record
    DELETE FROM activity_slots AS a
    USING step, unnest(%(rel_step)b::bigint[], %(rel_key)b::text[], %(rel_holder)b::text[])
        AS r(i, key, holder)
    WHERE r.i = step.i AND a.tenant = step.tenant AND a.key = r.key AND a.holder = r.holder
), notified AS (
    SELECT count(*) AS n FROM (
        SELECT pg_notify(%(channel)s, id) FROM step WHERE claimable
        UNION ALL SELECT pg_notify(%(channel)s, execution_id) FROM woken) q
)
SELECT step.id IS NOT NULL, x.seq, x.fence, (SELECT n FROM notified)
FROM s
LEFT JOIN step ON step.i = s.i
LEFT JOIN executions AS x ON x.tenant = s.tenant AND x.id = s.id
ORDER BY s.i;

-- name: slot_lock
-- The writes to one concurrency key's slots take turns (until the transaction ends): a
-- start's place in the queue and a hand-over are decided on rows nobody else is changing.
SELECT pg_advisory_xact_lock(hashtext('wovyr.slot.' || %(tenant)s), hashtext(%(key)s));

-- name: take_slot
-- A new execution (inserted by this transaction) takes a slot of its key when fewer than
-- `limit` are held and nobody waits; else it waits: not ready, waiting on the key.
WITH counts AS (
    SELECT count(*) FILTER (WHERE holding) AS held, count(*) FILTER (WHERE NOT holding) AS waiting
    FROM flow_slots
    WHERE tenant = %(tenant)s AND key = %(key)s
), slot AS (
    INSERT INTO flow_slots (tenant, key, execution_id, holding)
    SELECT %(tenant)s, %(key)s, %(id)s, counts.held < %(limit)s AND counts.waiting = 0
    FROM counts
    RETURNING holding
), queued AS (
    UPDATE executions
    SET ready = false, lease_owner = NULL, lease_until = NULL, flow_wait = %(key)s,
        waiting_on = 'concurrency ' || %(key)s
    WHERE tenant = %(tenant)s AND id = %(id)s AND NOT (SELECT holding FROM slot)
)
SELECT holding FROM slot;

-- name: release_slot
-- The step that ends execution `id` gives its slot back (or leaves the queue); the
-- executions waiting longest get the freed slots (while fewer than `limit` are held),
-- become ready and are announced. One snapshot: the leaving row is left out by id.
WITH gone AS (
    DELETE FROM flow_slots
    WHERE tenant = %(tenant)s AND key = %(key)s AND execution_id = %(id)s
), unwait AS (
    UPDATE executions SET flow_wait = NULL, waiting_on = NULL
    WHERE tenant = %(tenant)s AND id = %(id)s AND flow_wait IS NOT NULL
), held AS (
    SELECT count(*) AS n
    FROM flow_slots
    WHERE tenant = %(tenant)s AND key = %(key)s AND holding AND execution_id <> %(id)s
), next AS (
    SELECT seq
    FROM flow_slots
    WHERE tenant = %(tenant)s AND key = %(key)s AND NOT holding AND execution_id <> %(id)s
    ORDER BY seq
    LIMIT GREATEST(0, %(limit)s - (SELECT n FROM held))
), granted AS (
    UPDATE flow_slots AS f SET holding = true
    FROM next
    WHERE f.seq = next.seq
    RETURNING f.execution_id
), woke AS (
    UPDATE executions AS x SET ready = true, flow_wait = NULL, waiting_on = NULL
    FROM granted
    WHERE x.tenant = %(tenant)s AND x.id = granted.execution_id
    RETURNING x.id
)
SELECT count(*) FROM (SELECT pg_notify(%(channel)s, id) FROM woke) n;

-- name: slot_state
SELECT execution_id, holding
FROM flow_slots
WHERE tenant = %(tenant)s AND key = %(key)s
ORDER BY seq;
