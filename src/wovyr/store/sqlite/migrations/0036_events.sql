-- Schema version 36: event triggers and outbound webhooks (`wovyr.store.events`).
-- A trigger is a tenant's `kind: Trigger` document, found by its topic or by the opaque id
-- of its inbound webhook URL (`hook_id`); the HMAC keys it checks are the NAMES of the
-- tenant's secrets, inside the document (never a value).
CREATE TABLE triggers (
    tenant     TEXT NOT NULL,
    name       TEXT NOT NULL,
    topic      TEXT NOT NULL,
    hook_id    TEXT,
    document   TEXT NOT NULL,
    updated_at INTEGER NOT NULL,
    updated_by TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (tenant, name)
);
CREATE INDEX triggers_by_topic ON triggers (tenant, topic);
CREATE UNIQUE INDEX triggers_by_hook ON triggers (hook_id) WHERE hook_id IS NOT NULL;
-- Every event received, with what came of it (started, signalled, duplicate, filtered,
-- rejected, limited, failed): never its payload.
CREATE TABLE trigger_events (
    tenant       TEXT NOT NULL,
    id           TEXT NOT NULL,
    received_at  INTEGER NOT NULL,
    source       TEXT NOT NULL,
    topic        TEXT NOT NULL,
    trigger_name TEXT,
    outcome      TEXT NOT NULL,
    reason       TEXT NOT NULL DEFAULT '',
    execution_id TEXT,
    dedup_key    TEXT,
    size         INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant, id)
);
CREATE INDEX trigger_events_by_time ON trigger_events (tenant, received_at DESC, id DESC);
CREATE INDEX trigger_events_by_trigger ON trigger_events (tenant, trigger_name, received_at);
-- The dedup keys a trigger has seen, each until it expires.
CREATE TABLE trigger_dedup (
    tenant       TEXT NOT NULL,
    trigger_name TEXT NOT NULL,
    key          TEXT NOT NULL,
    execution_id TEXT NOT NULL,
    expires_at   INTEGER NOT NULL,
    PRIMARY KEY (tenant, trigger_name, key)
) WITHOUT ROWID;
-- A tenant's webhook endpoints: the execution events sent (a JSON list), an optional CEL
-- filter, and the NAMES of the secrets deliveries are signed with (a JSON list, the first
-- the current key).
CREATE TABLE webhook_endpoints (
    tenant     TEXT NOT NULL,
    name       TEXT NOT NULL,
    url        TEXT NOT NULL,
    events     TEXT NOT NULL,
    filter     TEXT,
    secrets    TEXT NOT NULL,
    updated_at INTEGER NOT NULL,
    updated_by TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (tenant, name)
);
-- The outbox: one row per (endpoint, execution event), written in the transaction of the
-- step that made the event; the dispatcher delivers it (at least once, under its id).
CREATE TABLE webhook_deliveries (
    tenant       TEXT NOT NULL,
    id           TEXT NOT NULL,
    endpoint     TEXT NOT NULL,
    event        TEXT NOT NULL,
    execution_id TEXT NOT NULL,
    seq          INTEGER NOT NULL,
    payload      TEXT NOT NULL,
    status       TEXT NOT NULL,
    attempts     INTEGER NOT NULL DEFAULT 0,
    next_at      INTEGER NOT NULL,
    last_error   TEXT NOT NULL DEFAULT '',
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL,
    PRIMARY KEY (tenant, id)
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_at) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_by_time ON webhook_deliveries (tenant, created_at DESC, id DESC);
CREATE TABLE webhook_attempts (
    tenant      TEXT NOT NULL,
    delivery_id TEXT NOT NULL,
    attempt     INTEGER NOT NULL,
    at          INTEGER NOT NULL,
    status_code INTEGER,
    error       TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (tenant, delivery_id, attempt)
) WITHOUT ROWID;
