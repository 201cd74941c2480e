-- Schema version 35: bulk actions (`wovyr.store.bulk`). A batch is one action over the
-- executions a frozen filter selects, run in pages by whoever holds its lease; its items are
-- the executions it listed, each pending until its outcome is recorded.
CREATE TABLE batches (
    tenant          text NOT NULL,
    id              text NOT NULL,
    action          text NOT NULL,
    filter          json NOT NULL,
    signal          text,
    payload         json,
    created_at      timestamptz NOT NULL,
    created_by      text NOT NULL,
    fingerprint     text NOT NULL,
    idempotency_key text,
    status          text NOT NULL,
    updated_at      timestamptz NOT NULL,
    finished_at     timestamptz,
    cursor          text,
    listed_all      boolean NOT NULL DEFAULT false,
    listed          bigint NOT NULL DEFAULT 0,
    ok              bigint NOT NULL DEFAULT 0,
    skipped         bigint NOT NULL DEFAULT 0,
    errors          bigint NOT NULL DEFAULT 0,
    pages           bigint NOT NULL DEFAULT 0,
    lease_owner     text,
    lease_until     timestamptz,
    fence           bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant, id)
);
CREATE INDEX batches_by_created ON batches (tenant, created_at DESC, id DESC);
CREATE UNIQUE INDEX batches_by_key ON batches (tenant, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
-- a running batch is found by its fingerprint; and the runners' claim walks the running ones
CREATE UNIQUE INDEX batches_running ON batches (tenant, fingerprint) WHERE status = 'running';
CREATE INDEX batches_claimable ON batches (updated_at) WHERE status = 'running';
CREATE TABLE batch_items (
    tenant       text NOT NULL,
    batch_id     text NOT NULL,
    n            bigint NOT NULL,
    execution_id text NOT NULL,
    outcome      text NOT NULL,
    detail       text NOT NULL DEFAULT '',
    at           timestamptz,
    PRIMARY KEY (tenant, batch_id, n)
);
CREATE UNIQUE INDEX batch_items_by_execution ON batch_items (tenant, batch_id, execution_id);
CREATE INDEX batch_items_pending ON batch_items (tenant, batch_id, n) WHERE outcome = 'pending';
