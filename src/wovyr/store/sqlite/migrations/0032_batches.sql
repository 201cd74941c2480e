-- Schema version 32: bulk actions (`wovyr.store.bulk`). A batch is one action over the
-- executions a frozen filter selects, run in pages by whoever holds its lease; its items are
-- the executions it listed, each pending until its outcome is recorded.
CREATE TABLE batches (
    tenant          TEXT NOT NULL,
    id              TEXT NOT NULL,
    action          TEXT NOT NULL,
    filter          TEXT NOT NULL,
    signal          TEXT,
    payload         TEXT,
    created_at      INTEGER NOT NULL,
    created_by      TEXT NOT NULL,
    fingerprint     TEXT NOT NULL,
    idempotency_key TEXT,
    status          TEXT NOT NULL,
    updated_at      INTEGER NOT NULL,
    finished_at     INTEGER,
    cursor          TEXT,
    listed_all      INTEGER NOT NULL DEFAULT 0,
    listed          INTEGER NOT NULL DEFAULT 0,
    ok              INTEGER NOT NULL DEFAULT 0,
    skipped         INTEGER NOT NULL DEFAULT 0,
    errors          INTEGER NOT NULL DEFAULT 0,
    pages           INTEGER NOT NULL DEFAULT 0,
    lease_owner     TEXT,
    lease_until     INTEGER,
    fence           INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant, id)
);
CREATE INDEX batches_by_created ON batches (tenant, created_at DESC, id DESC);
CREATE UNIQUE INDEX batches_by_key ON batches (tenant, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
-- a running batch is found by its fingerprint; and the runners' claim walks the running ones
CREATE UNIQUE INDEX batches_running ON batches (tenant, fingerprint) WHERE status = 'running';
CREATE INDEX batches_claimable ON batches (updated_at) WHERE status = 'running';
CREATE TABLE batch_items (
    tenant       TEXT NOT NULL,
    batch_id     TEXT NOT NULL,
    n            INTEGER NOT NULL,
    execution_id TEXT NOT NULL,
    outcome      TEXT NOT NULL,
    detail       TEXT NOT NULL DEFAULT '',
    at           INTEGER,
    PRIMARY KEY (tenant, batch_id, n)
) WITHOUT ROWID;
CREATE UNIQUE INDEX batch_items_by_execution ON batch_items (tenant, batch_id, execution_id);
CREATE INDEX batch_items_pending ON batch_items (tenant, batch_id, n) WHERE outcome = 'pending';
