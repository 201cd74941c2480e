-- Tenants' MCP servers (`wovyr mcp add`): a program the worker starts (stdio, `command` a
-- JSON argv) or a streamable-HTTP endpoint (`url`); `header_secrets` maps an HTTP header to
-- the NAME of the tenant's secret sent in it (never a value).
CREATE TABLE mcp_servers (
    tenant         TEXT NOT NULL,
    name           TEXT NOT NULL,
    transport      TEXT NOT NULL,
    command        TEXT,
    url            TEXT,
    header_secrets TEXT NOT NULL DEFAULT '{}',
    updated_at     INTEGER NOT NULL,
    updated_by     TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (tenant, name)
);
