-- Tenants' model providers (`wovyr providers set`): an OpenAI-compatible endpoint, the NAME
-- of the tenant's secret holding its API key (never a value), an optional default model and
-- prices per 1M tokens.
CREATE TABLE providers (
    tenant         TEXT NOT NULL,
    name           TEXT NOT NULL,
    base_url       TEXT NOT NULL,
    api_key_secret TEXT,
    default_model  TEXT,
    price_in       REAL,
    price_out      REAL,
    updated_at     INTEGER NOT NULL,
    updated_by     TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (tenant, name)
);
