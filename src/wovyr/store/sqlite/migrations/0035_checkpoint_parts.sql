-- Schema version 35: a large checkpoint kept as a base and the deltas written on it
-- (`wovyr.store.checkpoints`), instead of the whole checkpoint rewritten in the executions
-- row on every step (SQLite rewrites a row's overflow pages whenever the row changes size).
-- The executions row's checkpoint column is '' while its checkpoint lies here: the row of
-- the lowest seq is the base (the whole checkpoint), each later one the delta of the step
-- that led to its seq. Smaller checkpoints stay in the row, as before.
CREATE TABLE checkpoint_parts (
    tenant       TEXT NOT NULL,
    execution_id TEXT NOT NULL,
    seq          INTEGER NOT NULL,
    body         TEXT NOT NULL,
    PRIMARY KEY (tenant, execution_id, seq)
);

CREATE TRIGGER checkpoint_parts_purge AFTER DELETE ON executions
BEGIN
    DELETE FROM checkpoint_parts WHERE tenant = old.tenant AND execution_id = old.id;
END;
