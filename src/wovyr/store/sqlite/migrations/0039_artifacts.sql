-- Schema version 38: artifacts (`wovyr.store.artifacts`), bytes a tenant stores once by
-- content hash (`sha256:<hex>`) and steps reference; a sealing tenant's bytes are sealed.
CREATE TABLE artifacts (
    tenant     TEXT NOT NULL,
    digest     TEXT NOT NULL,
    media_type TEXT NOT NULL,
    size       INTEGER NOT NULL,
    data       BLOB NOT NULL,
    created_at INTEGER NOT NULL,
    created_by TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (tenant, digest)
);
CREATE INDEX artifacts_by_time ON artifacts (tenant, created_at DESC, digest DESC);
