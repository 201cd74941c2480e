-- The audit chain (wovyr.store.audit): one row per audited mutation, appended in the
-- transaction of the change; BEGIN IMMEDIATE serialises appenders on the head (max seq).
-- Anchors (HMACs over a head's seq and hash) live apart from the chain.
CREATE TABLE audit_log (
    seq       INTEGER PRIMARY KEY,
    at        INTEGER NOT NULL,
    tenant    TEXT NOT NULL,
    actor     TEXT NOT NULL,
    action    TEXT NOT NULL,
    target    TEXT NOT NULL,
    details   TEXT NOT NULL,
    prev_hash TEXT NOT NULL,
    hash      TEXT NOT NULL
);
CREATE INDEX audit_log_tenant ON audit_log (tenant, seq);
CREATE TABLE audit_anchors (
    id   INTEGER PRIMARY KEY AUTOINCREMENT,
    seq  INTEGER NOT NULL,
    hash TEXT NOT NULL,
    mac  TEXT NOT NULL,
    at   INTEGER NOT NULL
);
