-- Tenants' MCP servers (`wovyr mcp add`): a program the worker starts (stdio, `command` a
-- JSON argv) or a streamable-HTTP endpoint (`url`); `header_secrets` maps an HTTP header to
-- the NAME of the tenant's secret sent in it (never a value).
CREATE TABLE mcp_servers (
    tenant         text NOT NULL,
    name           text NOT NULL,
    transport      text NOT NULL,
    command        jsonb,
    url            text,
    header_secrets jsonb NOT NULL DEFAULT '{}',
    updated_at     timestamptz NOT NULL,
    updated_by     text NOT NULL DEFAULT '',
    PRIMARY KEY (tenant, name)
);
