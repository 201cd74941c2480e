-- The audit chain (wovyr.store.audit): one row per audited mutation, appended in the
-- transaction of the change. Appenders of every process serialise on the one row of
-- audit_head (SELECT ... FOR UPDATE), which holds the chain's last seq and hash.
-- Anchors (HMACs over a head's seq and hash) live apart from the chain.
CREATE TABLE audit_log (
    seq       bigint PRIMARY KEY,
    at        timestamptz NOT NULL,
    tenant    text NOT NULL,
    actor     text NOT NULL,
    action    text NOT NULL,
    target    text NOT NULL,
    details   jsonb NOT NULL,
    prev_hash text NOT NULL,
    hash      text NOT NULL
);
CREATE INDEX audit_log_tenant ON audit_log (tenant, seq);
CREATE TABLE audit_head (
    id   integer PRIMARY KEY CHECK (id = 1),
    seq  bigint NOT NULL,
    hash text NOT NULL
);
INSERT INTO audit_head (id, seq, hash) VALUES (1, 0, repeat('0', 64));
CREATE TABLE audit_anchors (
    id   bigserial PRIMARY KEY,
    seq  bigint NOT NULL,
    hash text NOT NULL,
    mac  text NOT NULL,
    at   timestamptz NOT NULL
);
