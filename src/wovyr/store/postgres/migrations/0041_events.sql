-- Schema version 41: event triggers and outbound webhooks (`wovyr.store.events`).
-- A trigger is a tenant's `kind: Trigger` document, found by its topic or by the opaque id
-- of its inbound webhook URL (`hook_id`); the HMAC keys it checks are the NAMES of the
-- tenant's secrets, inside the document (never a value).
CREATE TABLE triggers (
    tenant     text NOT NULL,
    name       text NOT NULL,
    topic      text NOT NULL,
    hook_id    text,
    document   text NOT NULL,
    updated_at timestamptz NOT NULL,
    updated_by text NOT NULL DEFAULT '',
    PRIMARY KEY (tenant, name)
);
CREATE INDEX triggers_by_topic ON triggers (tenant, topic);
CREATE UNIQUE INDEX triggers_by_hook ON triggers (hook_id) WHERE hook_id IS NOT NULL;
-- Every event received, with what came of it (started, signalled, duplicate, filtered,
-- rejected, limited, failed): never its payload.
CREATE TABLE trigger_events (
    tenant       text NOT NULL,
    id           text NOT NULL,
    received_at timestamptz NOT NULL,
    source       text NOT NULL,
    topic        text NOT NULL,
    trigger_name text,
    outcome      text NOT NULL,
    reason       text NOT NULL DEFAULT '',
    execution_id text,
    dedup_key    text,
    size         integer NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant, id)
);
CREATE INDEX trigger_events_by_time ON trigger_events (tenant, received_at DESC, id DESC);
CREATE INDEX trigger_events_by_trigger ON trigger_events (tenant, trigger_name, received_at);
-- The dedup keys a trigger has seen, each until it expires.
CREATE TABLE trigger_dedup (
    tenant       text NOT NULL,
    trigger_name text NOT NULL,
    key          text NOT NULL,
    execution_id text NOT NULL,
    expires_at timestamptz NOT NULL,
    PRIMARY KEY (tenant, trigger_name, key)
);
-- A tenant's webhook endpoints: the execution events sent (a JSON list), an optional CEL
-- filter, and the NAMES of the secrets deliveries are signed with (a JSON list, the first
-- the current key).
CREATE TABLE webhook_endpoints (
    tenant     text NOT NULL,
    name       text NOT NULL,
    url        text NOT NULL,
    events     text NOT NULL,
    filter     text,
    secrets    text NOT NULL,
    updated_at timestamptz NOT NULL,
    updated_by text NOT NULL DEFAULT '',
    PRIMARY KEY (tenant, name)
);
-- The outbox: one row per (endpoint, execution event), written in the transaction of the
-- step that made the event; the dispatcher delivers it (at least once, under its id).
CREATE TABLE webhook_deliveries (
    tenant       text NOT NULL,
    id           text NOT NULL,
    endpoint     text NOT NULL,
    event        text NOT NULL,
    execution_id text NOT NULL,
    seq          integer NOT NULL,
    payload      text NOT NULL,
    status       text NOT NULL,
    attempts     integer NOT NULL DEFAULT 0,
    next_at timestamptz NOT NULL,
    last_error   text NOT NULL DEFAULT '',
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    PRIMARY KEY (tenant, id)
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_at) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_by_time ON webhook_deliveries (tenant, created_at DESC, id DESC);
CREATE TABLE webhook_attempts (
    tenant      text NOT NULL,
    delivery_id text NOT NULL,
    attempt     integer NOT NULL,
    at timestamptz NOT NULL,
    status_code integer,
    error       text NOT NULL DEFAULT '',
    PRIMARY KEY (tenant, delivery_id, attempt)
);
