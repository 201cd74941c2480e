-- Tenants with settings an administrator set (`wovyr admin tenants set`): today the
-- side-effect policy, as JSON text (NULL: the tenant's default). A tenant with no row has
-- every default.
CREATE TABLE tenants (
    tenant     TEXT PRIMARY KEY,
    policy     TEXT,
    updated_at INTEGER NOT NULL,
    updated_by TEXT NOT NULL DEFAULT ''
);
