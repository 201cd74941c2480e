-- Model responses memoized by `llm` activities with `cache: true`, per tenant, keyed by
-- the SHA-256 of the request (provider, model, messages, parameters). The first response
-- stored for a request stays.
CREATE TABLE llm_responses (
    tenant       text NOT NULL,
    request_hash text NOT NULL,
    response     jsonb NOT NULL,
    created_at   timestamptz NOT NULL,
    PRIMARY KEY (tenant, request_hash)
);
