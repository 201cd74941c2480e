-- Wovyr PostgreSQL store, schema version 1.
--
-- Times are timestamptz (microseconds, like the embedded store). JSON values are `json`, not
-- `jsonb`: `json` keeps the text it was given, so objects come back with their keys in the
-- order they were written (jsonb sorts keys and drops duplicates), exactly as the memory and
-- SQLite stores return them. Cast to jsonb in a query or an expression index when needed.
-- `shard` is crc32(id) mod 1024 (wovyr.store.shards.stable_shard), set by the store at insert.

CREATE TABLE definitions (
    tenant      text NOT NULL,
    hash        text NOT NULL,
    name        text NOT NULL,
    version     text NOT NULL,
    source      text NOT NULL,
    created_at  timestamptz NOT NULL,
    inserted    bigint GENERATED ALWAYS AS IDENTITY,
    PRIMARY KEY (tenant, hash)
);
CREATE INDEX definitions_by_name ON definitions (tenant, name, created_at DESC, inserted DESC);

CREATE TABLE executions (
    id              text PRIMARY KEY,
    tenant          text NOT NULL,
    workflow        text NOT NULL,
    version         text NOT NULL,
    definition_hash text NOT NULL,
    status          text NOT NULL,
    created_at      timestamptz NOT NULL,
    updated_at      timestamptz NOT NULL,
    parent_id       text,
    seq             bigint NOT NULL,
    ready           boolean NOT NULL DEFAULT false,
    lease_owner     text,
    lease_until     timestamptz,
    fence           bigint NOT NULL DEFAULT 0,
    shard           integer NOT NULL CHECK (shard >= 0 AND shard < 1024),
    waiting_on      text,
    input           json,
    output          json,
    error           json,
    checkpoint      json NOT NULL
);
-- Claimable rows: only ready ones are indexed, in claim order (free leases first).
CREATE INDEX executions_ready ON executions (lease_until NULLS FIRST) WHERE ready;
CREATE INDEX executions_by_created ON executions (tenant, created_at DESC, id DESC);
CREATE INDEX executions_by_status ON executions (tenant, status, created_at DESC, id DESC);
CREATE INDEX executions_by_workflow ON executions (tenant, workflow, created_at DESC, id DESC);
CREATE INDEX executions_by_parent ON executions (parent_id) WHERE parent_id IS NOT NULL;
CREATE INDEX executions_by_owner ON executions (lease_owner) WHERE lease_owner IS NOT NULL;

CREATE TABLE events (
    execution_id text NOT NULL,
    seq          bigint NOT NULL,
    type         text NOT NULL,
    at           timestamptz NOT NULL,
    data         json NOT NULL,
    PRIMARY KEY (execution_id, seq)
);

CREATE TABLE timers (
    execution_id text NOT NULL,
    timer_id     text NOT NULL,
    fire_at      timestamptz NOT NULL,
    PRIMARY KEY (execution_id, timer_id)
);
CREATE INDEX timers_due ON timers (fire_at);
