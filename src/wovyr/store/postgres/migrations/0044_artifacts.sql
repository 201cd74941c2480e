-- Schema version 43: artifacts (`wovyr.store.artifacts`), bytes a tenant stores once by
-- content hash (`sha256:<hex>`) and steps reference; a sealing tenant's bytes are sealed.
CREATE TABLE artifacts (
    tenant     text NOT NULL,
    digest     text NOT NULL,
    media_type text NOT NULL,
    size       bigint NOT NULL,
    data       bytea NOT NULL,
    created_at timestamptz NOT NULL,
    created_by text NOT NULL DEFAULT '',
    PRIMARY KEY (tenant, digest)
);
CREATE INDEX artifacts_by_time ON artifacts (tenant, created_at DESC, digest DESC);
