-- The stream journal (`wovyr.store.streams`): what running model calls streamed, in
-- batches, numbered per execution. Side data beside the events: never part of a step's
-- transaction. Chunks go with their execution (the foreign key's cascade).
CREATE TABLE stream_chunks (
    tenant       text NOT NULL,
    execution_id text NOT NULL,
    n            bigint NOT NULL,
    activity     text NOT NULL,
    attempt      integer NOT NULL,
    recovery     integer NOT NULL,
    turn         integer NOT NULL,
    kind         text NOT NULL,
    text         text NOT NULL,
    at           timestamptz NOT NULL,
    PRIMARY KEY (tenant, execution_id, n),
    FOREIGN KEY (tenant, execution_id) REFERENCES executions (tenant, id) ON DELETE CASCADE
);
