-- Schema version 9: execution ids are per tenant. An execution is named by (tenant, id), and
-- so are its events and timers: the same id in two tenants is two executions. Rows that
-- exist keep their ids and their tenant (events and timers take their execution's, else
-- `default`). SQLite cannot change a primary key in place, so the three tables are rebuilt.
CREATE TABLE executions_v9 (
    tenant          TEXT NOT NULL,
    id              TEXT NOT NULL,
    workflow        TEXT NOT NULL,
    version         TEXT NOT NULL,
    definition_hash TEXT NOT NULL,
    status          TEXT NOT NULL,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL,
    parent_id       TEXT,
    seq             INTEGER NOT NULL,
    ready           INTEGER NOT NULL DEFAULT 0,
    lease_owner     TEXT,
    lease_until     INTEGER,
    fence           INTEGER NOT NULL DEFAULT 0,
    waiting_on      TEXT,
    input           TEXT,
    output          TEXT,
    error           TEXT,
    checkpoint      TEXT NOT NULL,
    shard           INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant, id)
);
INSERT INTO executions_v9 (tenant, id, workflow, version, definition_hash, status, created_at,
    updated_at, parent_id, seq, ready, lease_owner, lease_until, fence, waiting_on, input,
    output, error, checkpoint, shard)
SELECT tenant, id, workflow, version, definition_hash, status, created_at, updated_at,
    parent_id, seq, ready, lease_owner, lease_until, fence, waiting_on, input, output, error,
    checkpoint, shard
FROM executions;

CREATE TABLE events_v9 (
    tenant       TEXT NOT NULL,
    execution_id TEXT NOT NULL,
    seq          INTEGER NOT NULL,
    type         TEXT NOT NULL,
    at           INTEGER NOT NULL,
    data         TEXT NOT NULL,
    PRIMARY KEY (tenant, execution_id, seq)
) WITHOUT ROWID;
INSERT INTO events_v9 (tenant, execution_id, seq, type, at, data)
SELECT coalesce((SELECT x.tenant FROM executions AS x WHERE x.id = e.execution_id), 'default'),
    e.execution_id, e.seq, e.type, e.at, e.data
FROM events AS e;

CREATE TABLE timers_v9 (
    tenant       TEXT NOT NULL,
    execution_id TEXT NOT NULL,
    timer_id     TEXT NOT NULL,
    fire_at      INTEGER NOT NULL,
    PRIMARY KEY (tenant, execution_id, timer_id)
) WITHOUT ROWID;
INSERT INTO timers_v9 (tenant, execution_id, timer_id, fire_at)
SELECT coalesce((SELECT x.tenant FROM executions AS x WHERE x.id = t.execution_id), 'default'),
    t.execution_id, t.timer_id, t.fire_at
FROM timers AS t;
-- The old tables go only now: events and timers found their tenant through the old
-- executions table's primary key on id.
DROP TABLE executions;
ALTER TABLE executions_v9 RENAME TO executions;
DROP TABLE events;
ALTER TABLE events_v9 RENAME TO events;
DROP TABLE timers;
ALTER TABLE timers_v9 RENAME TO timers;
CREATE INDEX timers_due ON timers (fire_at);
CREATE INDEX executions_ready ON executions (lease_until) WHERE ready = 1;
CREATE INDEX executions_by_created ON executions (tenant, created_at DESC, id DESC);
CREATE INDEX executions_by_status ON executions (tenant, status, created_at DESC, id DESC);
CREATE INDEX executions_by_workflow ON executions (tenant, workflow, created_at DESC, id DESC);
CREATE INDEX executions_by_parent ON executions (tenant, parent_id) WHERE parent_id IS NOT NULL;
CREATE INDEX executions_by_owner ON executions (lease_owner) WHERE lease_owner IS NOT NULL;
CREATE INDEX executions_waiting ON executions (tenant, created_at DESC, id DESC)
    WHERE status = 'running' AND waiting_on IS NOT NULL;
