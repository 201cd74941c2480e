-- Tenants' model providers (`wovyr providers set`): an OpenAI-compatible endpoint, the NAME
-- of the tenant's secret holding its API key (never a value), an optional default model and
-- prices per 1M tokens.
CREATE TABLE providers (
    tenant         text NOT NULL,
    name           text NOT NULL,
    base_url       text NOT NULL,
    api_key_secret text,
    default_model  text,
    price_in       double precision,
    price_out      double precision,
    updated_at     timestamptz NOT NULL,
    updated_by     text NOT NULL DEFAULT '',
    PRIMARY KEY (tenant, name)
);
