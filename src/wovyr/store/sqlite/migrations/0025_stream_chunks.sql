-- The stream journal (`wovyr.store.streams`): what running model calls streamed, in
-- batches, numbered per execution. Side data beside the events: never part of a step's
-- transaction. Chunks go with their execution (the trigger below).
CREATE TABLE stream_chunks (
    tenant       TEXT NOT NULL,
    execution_id TEXT NOT NULL,
    n            INTEGER NOT NULL,
    activity     TEXT NOT NULL,
    attempt      INTEGER NOT NULL,
    recovery     INTEGER NOT NULL,
    turn         INTEGER NOT NULL,
    kind         TEXT NOT NULL,
    text         TEXT NOT NULL,
    at           INTEGER NOT NULL,
    PRIMARY KEY (tenant, execution_id, n)
) WITHOUT ROWID;

CREATE TRIGGER stream_chunks_purge AFTER DELETE ON executions
BEGIN
    DELETE FROM stream_chunks WHERE tenant = old.tenant AND execution_id = old.id;
END;
