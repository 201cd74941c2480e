-- Schema version 40: the deltas written on a large checkpoint (`wovyr.store.checkpoints`),
-- instead of the whole checkpoint rewritten on every step. The executions row keeps the
-- base (its checkpoint column; an update that leaves the column alone keeps its TOAST
-- value, unwritten); each row here is the delta of the step that led to its seq, on that
-- base. A whole write removes them (the same statement).
CREATE TABLE checkpoint_deltas (
    tenant       text NOT NULL,
    execution_id text NOT NULL,
    seq          bigint NOT NULL,
    body         json NOT NULL,
    PRIMARY KEY (tenant, execution_id, seq),
    FOREIGN KEY (tenant, execution_id) REFERENCES executions (tenant, id) ON DELETE CASCADE
);
