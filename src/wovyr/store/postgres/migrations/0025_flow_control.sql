-- Schema version 25: flow control held in the store.
--
-- Concurrency keys: one row per execution that holds (holding) or waits for (NOT holding)
-- a slot of its key, per tenant; `seq` is the start order (rows of one key are inserted
-- under the key's advisory lock, so their order is the order of the starts). An execution
-- waiting for a slot is not ready and names the key in `flow_wait`; a step of it cannot
-- make it ready until the slot is handed to it (by the step that ends a holder, in that
-- step's transaction).
ALTER TABLE executions ADD COLUMN flow_wait text;
CREATE TABLE flow_slots (
    seq          bigserial PRIMARY KEY,
    tenant       text NOT NULL,
    key          text NOT NULL,
    execution_id text NOT NULL,
    holding      boolean NOT NULL,
    UNIQUE (tenant, key, execution_id)
);
CREATE INDEX flow_slots_by_key ON flow_slots (tenant, key, holding, seq);
-- Activity concurrency keys: the slots running attempts hold (`holder` names the attempt),
-- counted only while their execution's lease is still `owner`'s and unexpired (a crashed
-- worker's slots come back when its leases expire); the step recording an attempt's
-- result deletes its row.
CREATE TABLE activity_slots (
    tenant       text NOT NULL,
    key          text NOT NULL,
    holder       text NOT NULL,
    execution_id text NOT NULL,
    owner        text NOT NULL,
    PRIMARY KEY (tenant, key, holder)
);
-- Rate limits: a token bucket per (tenant, key), shared by every worker: `tokens` as of
-- `refilled_at`, refilled at `per_second` up to `capacity`; `wake_at`: when the last
-- attempt told to wait was told to look again (the next one is told later, so waiters look
-- one at a time). A bucket an admin declared (`declared`) keeps its capacity and rate
-- whatever activities say.
CREATE TABLE rate_buckets (
    tenant      text NOT NULL,
    key         text NOT NULL,
    capacity    double precision NOT NULL,
    per_second  double precision NOT NULL,
    tokens      double precision NOT NULL,
    refilled_at timestamptz NOT NULL,
    wake_at     timestamptz NOT NULL DEFAULT '1970-01-01 00:00:00+00',
    declared    boolean NOT NULL DEFAULT false,
    updated_by  text NOT NULL DEFAULT '',
    PRIMARY KEY (tenant, key)
);
