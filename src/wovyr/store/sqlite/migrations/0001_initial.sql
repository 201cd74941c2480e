-- Wovyr embedded store, schema version 1. Times are integer microseconds since the epoch (UTC).
CREATE TABLE definitions (
    tenant      TEXT NOT NULL,
    hash        TEXT NOT NULL,
    name        TEXT NOT NULL,
    version     TEXT NOT NULL,
    source      TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    PRIMARY KEY (tenant, hash)
);
CREATE INDEX definitions_by_name ON definitions (tenant, name, created_at);

CREATE TABLE executions (
    id              TEXT PRIMARY KEY,
    tenant          TEXT NOT NULL,
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
    checkpoint      TEXT NOT NULL
);
CREATE INDEX executions_ready ON executions (lease_until) WHERE ready = 1;
CREATE INDEX executions_by_created ON executions (tenant, created_at DESC, id DESC);
CREATE INDEX executions_by_status ON executions (tenant, status, created_at DESC, id DESC);
CREATE INDEX executions_by_workflow ON executions (tenant, workflow, created_at DESC, id DESC);
CREATE INDEX executions_by_parent ON executions (parent_id) WHERE parent_id IS NOT NULL;
CREATE INDEX executions_by_owner ON executions (lease_owner) WHERE lease_owner IS NOT NULL;

CREATE TABLE events (
    execution_id TEXT NOT NULL,
    seq          INTEGER NOT NULL,
    type         TEXT NOT NULL,
    at           INTEGER NOT NULL,
    data         TEXT NOT NULL,
    PRIMARY KEY (execution_id, seq)
) WITHOUT ROWID;

CREATE TABLE timers (
    execution_id TEXT NOT NULL,
    timer_id     TEXT NOT NULL,
    fire_at      INTEGER NOT NULL,
    PRIMARY KEY (execution_id, timer_id)
) WITHOUT ROWID;
CREATE INDEX timers_due ON timers (fire_at);
