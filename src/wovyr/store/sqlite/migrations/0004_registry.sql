-- The definition registry: (name, version) -> content hash, applied once.
CREATE TABLE registry (
    tenant     TEXT NOT NULL,
    name       TEXT NOT NULL,
    version    TEXT NOT NULL,
    hash       TEXT NOT NULL,
    applied_at INTEGER NOT NULL,
    PRIMARY KEY (tenant, name, version)
);
CREATE INDEX registry_latest ON registry (tenant, name, applied_at);
