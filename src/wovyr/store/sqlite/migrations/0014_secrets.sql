-- Secrets and the KMS: tenants' data keys wrapped by the root key (with the id of the root
-- key that wrapped each, so a rotation can go row by row), secrets encrypted with their
-- tenant's data key, and what is known of each root key (escrow, rotation). No plaintext.
CREATE TABLE data_keys (
    tenant     TEXT NOT NULL,
    version    INTEGER NOT NULL,
    wrapped    BLOB NOT NULL,
    root_id    TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (tenant, version)
);
CREATE TABLE secrets (
    tenant      TEXT NOT NULL,
    name        TEXT NOT NULL,
    version     INTEGER NOT NULL,
    ciphertext  BLOB NOT NULL,
    key_version INTEGER NOT NULL,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL,
    updated_by  TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (tenant, name)
);
CREATE TABLE kms_roots (
    root_id     TEXT PRIMARY KEY,
    created_at  INTEGER NOT NULL,
    escrowed_at INTEGER,
    escrowed_by TEXT NOT NULL DEFAULT '',
    rotated_at  INTEGER
);
