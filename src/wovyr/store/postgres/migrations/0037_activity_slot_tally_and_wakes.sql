-- Schema version 37: how many rows each activity concurrency key has, without a scan.
--
-- A gated transaction reads, for each slot key it asks, whether the key could be full (its
-- rows, stale ones included, plus the attempts asking, against the smallest limit asked):
-- only then are the holders themselves read. Counting the rows scanned the key's rows (and
-- visited the heap for each fresh one) on every gated transaction, growing with the
-- attempts in flight. The count is now the sum of a few tally rows.
--
-- A tally row is a signed change (+n inserted, -n deleted), appended by statement-level
-- triggers: appending takes no row lock, so the writers that release slots (in any order,
-- in their steps) never wait on each other or on a gate. The gate that reads a key holds
-- the key's advisory lock and folds the key's rows into one when they pile up
-- (`activity_slot_counts`), the only statement that deletes tally rows.
CREATE TABLE activity_slot_tally (
    tenant text NOT NULL,
    key    text NOT NULL,
    id     bigint GENERATED ALWAYS AS IDENTITY,
    n      integer NOT NULL,
    PRIMARY KEY (tenant, key, id)
);

INSERT INTO activity_slot_tally (tenant, key, n)
    SELECT tenant, key, count(*) FROM activity_slots GROUP BY tenant, key;

CREATE FUNCTION activity_slots_tally_added() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO activity_slot_tally (tenant, key, n)
        SELECT tenant, key, count(*) FROM added GROUP BY tenant, key;
    RETURN NULL;
END $$;

CREATE FUNCTION activity_slots_tally_gone() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO activity_slot_tally (tenant, key, n)
        SELECT tenant, key, -count(*) FROM gone GROUP BY tenant, key;
    RETURN NULL;
END $$;

-- An INSERT ... ON CONFLICT DO UPDATE passes only the rows it inserted in `added`.
CREATE TRIGGER activity_slots_added AFTER INSERT ON activity_slots
    REFERENCING NEW TABLE AS added FOR EACH STATEMENT
    EXECUTE FUNCTION activity_slots_tally_added();

CREATE TRIGGER activity_slots_gone AFTER DELETE ON activity_slots
    REFERENCING OLD TABLE AS gone FOR EACH STATEMENT
    EXECUTE FUNCTION activity_slots_tally_gone();

-- A slot freed wakes its key's oldest waiter not woken yet: the timer holding it fires at
-- once. A waiter refused a moment ago may not have armed that timer yet (the hold is the
-- next step of its execution): `woken` remembers the wake, and the step arming the hold
-- makes it due at once. A waiter that looks again and is refused again is not woken any
-- more.
ALTER TABLE activity_slot_waiters ADD COLUMN woken timestamptz;
