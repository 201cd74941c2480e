-- Schema version 17: secrets and the KMS. Tenants' data keys wrapped by the root key (with
-- the id of the root key that wrapped each, so a rotation can go row by row), secrets
-- encrypted with their tenant's data key, and what is known of each root key (escrow,
-- rotation). No plaintext.
CREATE TABLE data_keys (
    tenant     text NOT NULL,
    version    integer NOT NULL,
    wrapped    bytea NOT NULL,
    root_id    text NOT NULL,
    created_at timestamptz NOT NULL,
    PRIMARY KEY (tenant, version)
);
CREATE TABLE secrets (
    tenant      text NOT NULL,
    name        text NOT NULL,
    version     integer NOT NULL,
    ciphertext  bytea NOT NULL,
    key_version integer NOT NULL,
    created_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL,
    updated_by  text NOT NULL DEFAULT '',
    PRIMARY KEY (tenant, name)
);
CREATE TABLE kms_roots (
    root_id     text PRIMARY KEY,
    created_at  timestamptz NOT NULL,
    escrowed_at timestamptz,
    escrowed_by text NOT NULL DEFAULT '',
    rotated_at  timestamptz
);
