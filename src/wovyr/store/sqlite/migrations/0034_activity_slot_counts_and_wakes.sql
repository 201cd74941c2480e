-- Schema version 34: how many rows each activity concurrency key has, kept by triggers.
--
-- A gated step reads, for each slot key it asks, whether the key could be full (its rows,
-- stale ones included, plus the attempts asking, against the smallest limit asked): only
-- then are the holders themselves read. Counting the rows took a scan of the key's rows on
-- every gated transaction, growing with the attempts in flight; the count is now one row,
-- moved in the transaction that inserts or deletes a slot (an upsert that finds the row
-- updates it and fires no insert trigger).
CREATE TABLE activity_slot_counts (
    tenant TEXT NOT NULL,
    key    TEXT NOT NULL,
    n      INTEGER NOT NULL,
    PRIMARY KEY (tenant, key)
) WITHOUT ROWID;

INSERT INTO activity_slot_counts (tenant, key, n)
    SELECT tenant, key, count(*) FROM activity_slots GROUP BY tenant, key;

CREATE TRIGGER activity_slot_counted AFTER INSERT ON activity_slots BEGIN
    INSERT INTO activity_slot_counts (tenant, key, n) VALUES (new.tenant, new.key, 1)
        ON CONFLICT (tenant, key) DO UPDATE SET n = n + 1;
END;

CREATE TRIGGER activity_slot_uncounted AFTER DELETE ON activity_slots BEGIN
    UPDATE activity_slot_counts SET n = n - 1 WHERE tenant = old.tenant AND key = old.key;
    DELETE FROM activity_slot_counts
        WHERE tenant = old.tenant AND key = old.key AND n <= 0;
END;

-- A slot freed wakes its key's oldest waiter not woken yet: the timer holding it fires at
-- once. A waiter refused a moment ago may not have armed that timer yet (the hold is the
-- next step of its execution): `woken` (microseconds; 0: not woken) remembers the wake,
-- and the step arming the hold makes it due at once. A waiter that looks again and is
-- refused again is not woken any more.
ALTER TABLE activity_slot_waiters ADD COLUMN woken INTEGER NOT NULL DEFAULT 0;
