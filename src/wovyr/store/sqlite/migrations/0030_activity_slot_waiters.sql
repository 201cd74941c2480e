-- Schema version 30: the queue of attempts waiting for an activity concurrency slot.
--
-- An attempt refused a slot of its key is recorded here once (`seq`: the order in which
-- attempts began to wait); a slot that frees is kept for the oldest waiter, which takes it
-- when it looks again, and nobody who came later can take it first. A waiter counts while
-- its execution has not ended and it came back before `until` (microseconds; each look
-- moves it on); its row goes when it takes a slot.
CREATE TABLE activity_slot_waiters (
    seq          INTEGER PRIMARY KEY,
    tenant       TEXT NOT NULL,
    key          TEXT NOT NULL,
    holder       TEXT NOT NULL,
    execution_id TEXT NOT NULL,
    until        INTEGER NOT NULL,
    UNIQUE (tenant, key, holder)
);
CREATE INDEX activity_slot_waiters_by_key ON activity_slot_waiters (tenant, key, seq);
