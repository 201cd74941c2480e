-- Schema version 22: flow control held in the store.
--
-- Concurrency keys: one row per execution that holds (holding = 1) or waits for (0) a slot
-- of its key, per tenant; `seq` is the start order. An execution waiting for a slot is not
-- ready and names the key in `flow_wait`; a step of it cannot make it ready until the slot
-- is handed to it (by the step that ends a holder, in that step's transaction).
ALTER TABLE executions ADD COLUMN flow_wait TEXT;
CREATE TABLE flow_slots (
    seq          INTEGER PRIMARY KEY,
    tenant       TEXT NOT NULL,
    key          TEXT NOT NULL,
    execution_id TEXT NOT NULL,
    holding      INTEGER NOT NULL,
    UNIQUE (tenant, key, execution_id)
);
CREATE INDEX flow_slots_by_key ON flow_slots (tenant, key, holding, seq);
-- Activity concurrency keys: the slots running attempts hold (`holder` names the attempt),
-- counted only while their execution's lease is still `owner`'s and unexpired (a crashed
-- worker's slots come back when its leases expire); the step recording an attempt's
-- result deletes its row.
CREATE TABLE activity_slots (
    tenant       TEXT NOT NULL,
    key          TEXT NOT NULL,
    holder       TEXT NOT NULL,
    execution_id TEXT NOT NULL,
    owner        TEXT NOT NULL,
    PRIMARY KEY (tenant, key, holder)
);
-- Rate limits: a token bucket per (tenant, key), shared by every worker: `tokens` as of
-- `refilled_at` (microseconds), refilled at `per_second` up to `capacity`; `wake_at`: when
-- the last attempt told to wait was told to look again (the next one is told later, so
-- waiters look one at a time). A bucket an admin declared (`declared` = 1) keeps its
-- capacity and rate whatever activities say.
CREATE TABLE rate_buckets (
    tenant      TEXT NOT NULL,
    key         TEXT NOT NULL,
    capacity    REAL NOT NULL,
    per_second  REAL NOT NULL,
    tokens      REAL NOT NULL,
    refilled_at INTEGER NOT NULL,
    wake_at     INTEGER NOT NULL DEFAULT 0,
    declared    INTEGER NOT NULL DEFAULT 0,
    updated_by  TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (tenant, key)
);
