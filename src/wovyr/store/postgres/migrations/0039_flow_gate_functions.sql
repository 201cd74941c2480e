-- Schema version 39: a batch's activity gates read and written by one call each.
--
-- A gated batch sent nine statements (the clock, missing buckets made, buckets locked, slot
-- keys locked, slot keys counted; then buckets, slots and three waiter changes written),
-- each with its own parallel arrays: per statement the server binds and plans, the client
-- encodes every array element by element. The batch's gate rows now go as one JSON
-- document to a function that does the same statements in the same order.
--
-- A VOLATILE function's statements each take a fresh snapshot (READ COMMITTED): the counts
-- read after the advisory locks are taken see every change committed before them, as the
-- separate statements did.

-- doc: {"made": [{tenant, key, capacity, per_second}], "buckets": [{tenant, key}] (sorted),
--       "slots": [{tenant, key}] (sorted)}
-- Answers {"at": epoch seconds, "buckets": [[tenant, key, capacity, per_second, tokens,
-- refilled_at, wake_at (epoch seconds), declared]], "counts": [[tenant, key, rows,
-- queued]]}.
CREATE FUNCTION wovyr_flow_lock(now_at timestamptz, doc jsonb) RETURNS jsonb
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    at      timestamptz := COALESCE(now_at, now());
    buckets jsonb := '[]';
    counts  jsonb := '[]';
BEGIN
    -- Missing buckets an activity names with its own numbers start full.
    IF jsonb_array_length(doc->'made') > 0 THEN
        INSERT INTO rate_buckets (tenant, key, capacity, per_second, tokens, refilled_at)
        SELECT b.tenant, b.key, b.capacity, b.per_second, b.capacity, at
        FROM jsonb_to_recordset(doc->'made')
             AS b(tenant text, key text, capacity float8, per_second float8)
        ON CONFLICT (tenant, key) DO NOTHING;
    END IF;
    IF jsonb_array_length(doc->'buckets') > 0 THEN
        SELECT COALESCE(jsonb_agg(jsonb_build_array(
                   l.tenant, l.key, l.capacity, l.per_second, l.tokens,
                   extract(epoch FROM l.refilled_at), extract(epoch FROM l.wake_at),
                   l.declared)), '[]')
        INTO buckets
        FROM (
            SELECT b.* FROM rate_buckets b
            JOIN jsonb_to_recordset(doc->'buckets') AS k(tenant text, key text)
              ON b.tenant = k.tenant AND b.key = k.key
            ORDER BY b.tenant, b.key
            FOR UPDATE OF b
        ) l;
    END IF;
    IF jsonb_array_length(doc->'slots') > 0 THEN
        -- The keys come sorted: the locks are taken in that order (no two batches wait on
        -- each other in a cycle).
        PERFORM pg_advisory_xact_lock(hashtext('wovyr.activity-slot.' || (k.v->>'tenant')),
                                      hashtext(k.v->>'key'))
        FROM jsonb_array_elements(doc->'slots') WITH ORDINALITY AS k(v, n)
        ORDER BY k.n;
        -- A fresh snapshot, after the locks. Holders are counted by the key's tally rows
        -- (migration 37); a key whose tally has grown to more than 16 rows has them folded
        -- into one, under the key's advisory lock (the delete removes exactly the rows
        -- summed: rows appended meanwhile stay). Waiters (stale ones included) count too:
        -- only a key that could be full has its rows read.
        WITH k AS (
            SELECT * FROM jsonb_to_recordset(doc->'slots') AS k(tenant text, key text)
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
        SELECT COALESCE(jsonb_agg(jsonb_build_array(
                   tally.tenant, tally.key, tally.n + w.n, w.n > 0)), '[]')
        INTO counts
        FROM tally
        CROSS JOIN LATERAL (
            SELECT count(*) AS n FROM activity_slot_waiters w
            WHERE w.tenant = tally.tenant AND w.key = tally.key) w;
    END IF;
    RETURN jsonb_build_object('at', extract(epoch FROM at), 'buckets', buckets,
                              'counts', counts);
END $$;

-- doc: {"buckets": [{tenant, key, capacity, per_second, tokens, refilled_at, wake_at}]
--       (epoch seconds), "takes": [{tenant, key, holder, execution_id, owner}],
--       "served", "looked": [{tenant, key, holder}], "queued": [{tenant, key, holder,
--       execution_id}]}; `wait_until`: when the queued waiters stop waiting unless they look
-- again.
CREATE FUNCTION wovyr_flow_write(wait_until timestamptz, doc jsonb) RETURNS void
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    IF jsonb_array_length(doc->'buckets') > 0 THEN
        UPDATE rate_buckets AS b
        SET capacity = w.capacity, per_second = w.per_second, tokens = w.tokens,
            refilled_at = to_timestamp(w.refilled_at), wake_at = to_timestamp(w.wake_at)
        FROM jsonb_to_recordset(doc->'buckets')
             AS w(tenant text, key text, capacity float8, per_second float8, tokens float8,
                  refilled_at float8, wake_at float8)
        WHERE b.tenant = w.tenant AND b.key = w.key;
    END IF;
    IF jsonb_array_length(doc->'takes') > 0 THEN
        -- The keys' tally rows (+n) for the rows inserted (a holder taking its slot again
        -- updates its row: xmax is then set), in the same statement: the only statement
        -- that inserts slots, so no insert trigger is needed (deletes, made in many
        -- places, keep theirs).
        WITH taken AS (
            INSERT INTO activity_slots (tenant, key, holder, execution_id, owner)
            SELECT * FROM jsonb_to_recordset(doc->'takes')
                 AS t(tenant text, key text, holder text, execution_id text, owner text)
            ON CONFLICT (tenant, key, holder) DO UPDATE
            SET execution_id = EXCLUDED.execution_id, owner = EXCLUDED.owner
            RETURNING tenant, key, xmax = 0 AS fresh
        )
        INSERT INTO activity_slot_tally (tenant, key, n)
        SELECT tenant, key, count(*) FROM taken WHERE fresh GROUP BY tenant, key;
    END IF;
    IF jsonb_array_length(doc->'served') > 0 THEN
        -- Waiters that took their slots leave their queues.
        DELETE FROM activity_slot_waiters AS a
        USING jsonb_to_recordset(doc->'served') AS w(tenant text, key text, holder text)
        WHERE a.tenant = w.tenant AND a.key = w.key AND a.holder = w.holder;
    END IF;
    IF jsonb_array_length(doc->'looked') > 0 THEN
        -- Woken waiters that looked again (and were refused for another reason) are not
        -- woken any more: their next hold waits its own time.
        UPDATE activity_slot_waiters AS a SET woken = NULL
        FROM jsonb_to_recordset(doc->'looked') AS w(tenant text, key text, holder text)
        WHERE a.tenant = w.tenant AND a.key = w.key AND a.holder = w.holder
          AND a.woken IS NOT NULL;
    END IF;
    IF jsonb_array_length(doc->'queued') > 0 THEN
        -- A new waiter joins the end of its key's queue (under the key's lock); the others
        -- keep their place and their `until` moves on.
        INSERT INTO activity_slot_waiters (tenant, key, holder, execution_id, until)
        SELECT w.v->>'tenant', w.v->>'key', w.v->>'holder', w.v->>'execution_id', wait_until
        FROM jsonb_array_elements(doc->'queued') WITH ORDINALITY AS w(v, n)
        ORDER BY w.n
        ON CONFLICT (tenant, key, holder) DO UPDATE SET until = EXCLUDED.until, woken = NULL;
    END IF;
END $$;

DROP TRIGGER activity_slots_added ON activity_slots;
DROP FUNCTION activity_slots_tally_added();
